package policy

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// readinessCheck is one row of the readiness table: something the API server accepts in a Windows pod
// that fails, or does not do what it says, on the node. A row only warns: what fails at run time is
// usually the chart's choice to make, and the rewrites that narrow (a Windows user, memory limits) are
// the policy's, made before the checks run so that what they fixed is not reported.
type readinessCheck struct {
	rule Rule
	// detect finds the row's findings in a pod spec, in time linear in the spec's size.
	detect func(spec *corev1.PodSpec) []readinessFinding
	// fields are the Change.Field values detect's paths can have: the rule's share of the closed set of
	// the changes metric's field label.
	fields []string
	// reason is recorded with every finding, always the same text, so that a recorded finding finds its
	// rule again (RuleOf): what fails, and what to do.
	reason string
	// why it fails on Windows, what wincompat does, and the seed (file, section) or source that says so:
	// for the README's table.
	why, does, source string
}

// readinessFinding is one thing a run-time readiness check found: where (a record path naming
// containers and volumes by name) and what (the value found, recorded as the change's From).
type readinessFinding struct {
	Path  string
	Value json.RawMessage
}

// readinessChecks is the one readiness table: it drives the checks, the rules table's rows for them
// (explanation, metric fields, fixed reasons) and the README's table.
var readinessChecks = []readinessCheck{
	{
		rule:   RuleMemoryNoLimit,
		detect: memoryWithoutLimit,
		fields: inPlacingContainers(".resources.limits.memory"),
		reason: "no memory limit: Windows has no OOM killer or eviction, so the node over-commits and pages; set resources.limits.memory",
		why: "Windows treats memory as virtual and pages to disk instead of killing processes: the kubelet takes no OOM eviction " +
			"action, has no MemoryPressure condition and does not enforce reservations, so a container without a limit can take " +
			"the node's memory and slow every pod on it. Limits also count against NodeAllocatable, so the scheduler stops adding pods to a full node",
		does:   "warns for each container and init container without one (ephemeral containers take no resources)",
		source: "windows-containers-in-kubernetes-docs-v1.17-1.20.txt, Memory Reservations; windows-containers-in-kubernetes-docs-v1.27.txt, Command line options for the kubelet",
	},
	{
		rule:   RuleMemoryRequestNotLimit,
		detect: memoryRequestNotLimit,
		fields: inPlacingContainers(".resources.requests.memory"),
		reason: "memory request below the limit: Windows guarantees no request, so the node over-commits up to the limits; set requests.memory equal to limits.memory",
		why: "a request is only subtracted from what the scheduler sees as free; Windows cannot guarantee it, so a node whose " +
			"pods use more than they requested pages to disk. The docs ask for limits alone, or limits equal to requests",
		does:   "warns for each container and init container with both; a limit without a request is left alone (the request defaults to the limit)",
		source: "windows-containers-in-kubernetes-docs-v1.17-1.20.txt, Memory Reservations; windows-containers-in-kubernetes-docs-v1.27.txt, Field compatibility for container specifications (requests.memory)",
	},
	{
		rule:   RuleNonRootNoUser,
		detect: nonRootWithoutUser,
		fields: inContainers(".securityContext.runAsNonRoot"),
		reason: "runAsNonRoot with no Windows user: the kubelet refuses to start it (CreateContainerConfigError) if the image runs as ContainerAdministrator; set securityContext.windowsOptions.runAsUserName, e.g. ContainerUser",
		why: "on Windows the kubelet checks runAsNonRoot against the user name alone: with no runAsUserName on the container or " +
			"the pod, it reads the image's default user and refuses a container whose image runs as ContainerAdministrator " +
			"(Server Core and Windows images do; Nano Server runs as ContainerUser). The pod's setting applies to each container " +
			"that sets none, so each container is checked with the values it inherits. HostProcess pods are left out",
		does:   "warns for each container; the policy's rewrites (Pod Security restricted, the non-root intent of a removed runAsUser) run first, and a user they name is not reported",
		source: "windows-containers-in-kubernetes-docs-v1.27.txt, Field compatibility for container specifications (securityContext.runAsNonRoot); kubernetes v1.36 pkg/kubelet/kuberuntime/security_context_windows.go, verifyRunAsNonRoot",
	},
	{
		rule:   RuleNonRootAdminUser,
		detect: nonRootAsAdmin,
		fields: inContainers(".securityContext.windowsOptions.runAsUserName"),
		reason: "runAsNonRoot with runAsUserName ContainerAdministrator: the kubelet always refuses to start it; name a non-admin user such as ContainerUser",
		why: "ContainerAdministrator is the kubelet's root on Windows (compared without case): a container that asks for " +
			"runAsNonRoot and names that user, on itself or through the pod, is refused at every start",
		does:   "warns for each container",
		source: "kubernetes v1.36 pkg/kubelet/kuberuntime/security_context_windows.go, verifyRunAsNonRoot; windows-containers-in-kubernetes-docs-v1.27.txt, Field compatibility for container specifications (securityContext.runAsNonRoot)",
	},
	{
		rule:   RuleSubPath,
		detect: subPathMounts,
		fields: append(inContainers(".volumeMounts[*].subPath"), inContainers(".volumeMounts[*].subPathExpr")...),
		reason: "subPath mount: the Windows docs list it as unsupported; containerd mounts it, Docker-based runtimes cannot mount a single file; mount the whole volume where you can",
		why: "the storage sections list subPath (and subPath of Secrets, and single-file mappings) as unsupported. Checked against " +
			"the source: the kubelet prepares subpaths on Windows without bind mounts (pkg/volume/util/subpath/subpath_windows.go) " +
			"and subPath into ConfigMap, Secret, downward API and projected volumes is a conformance test not marked [LinuxOnly], so Windows nodes pass it; " +
			"a file as subPath of other volumes is tested on Linux only, and Docker-based runtimes (cri-dockerd, Mirantis) mount only " +
			"directories. So the finding is uncertain, and says so. A subPath naming a file is the single-file mount",
		does:   "warns for each mount with subPath or subPathExpr, saying the finding is uncertain",
		source: "windows-containers-in-kubernetes-docs-v1.24.txt, Persistent storage; kep-windows-node-support.txt, What will never work; kubernetes v1.36 test/e2e/storage/subpath.go and testsuites/subpath.go ([LinuxOnly] file cases)",
	},
	{
		rule:   RuleVolumeFileMode,
		detect: volumeFileModes,
		fields: volumeFileModeFields,
		reason: "file mode on a volume: ignored on Windows, which has no POSIX permissions; restrict access with ACLs in the image",
		why: "Windows files carry ACLs of SIDs, not mode bits of a UID and GID, and the container's SAM is not the node's: " +
			"defaultMode and items' mode set nothing. The API server's default defaultMode (0644) is not reported: every pod " +
			"with such a volume carries it once defaulted, and it asks for nothing",
		does:   "warns for a defaultMode other than 0644 and for each item's mode, on Secret, ConfigMap, downward API and projected volumes",
		source: "windows-containers-in-kubernetes-docs-v1.24.txt, Persistent storage (DefaultMode); kep-windows-node-support.txt, What will never work (DefaultMode)",
	},
	{
		rule:   RuleSecretOnDisk,
		detect: secretVolumes,
		fields: []string{"spec.volumes[*].secret", "spec.volumes[*].projected.sources[*].secret"},
		reason: "Secret volume: Windows writes it to the node's disk in clear text, not to memory; protect the node's disk (file ACLs, BitLocker)",
		why: "Linux keeps Secret volumes in tmpfs; a Windows node has no memory-backed volume and writes them as plain files " +
			"to its disk, where they stay readable to whoever can read that disk",
		does:   "warns for each Secret volume and each Secret source of a projected volume",
		source: "windows-containers-in-kubernetes-docs-v1.17-1.20.txt, Security (Secrets written in clear text); windows-containers-in-kubernetes-docs-v1.24.txt, Persistent storage (memory as the storage medium)",
	},
	{
		rule:   RuleUnmountableVolume,
		detect: unmountableVolumes,
		fields: unmountableVolumeFields,
		reason: "volume source Windows nodes cannot mount: the pod stays in ContainerCreating; use a CSI driver with a Windows node plugin, or SMB",
		why: "the Windows kubelet mounts network file systems only as SMB (mount-utils mount_windows.go: only cifs); nfs, iscsi " +
			"and fc call Linux tools, and cephfs, rbd, glusterfs, quobyte, storageos, scaleIO, flocker and photonPersistentDisk have " +
			"no kubelet plugin at all in v1.36. The in-tree sources the docs list for Windows (awsElasticBlockStore, azureDisk, " +
			"azureFile, gcePersistentDisk, vsphereVolume) now go to their CSI drivers, which have Windows node plugins",
		does:   "warns for each inline volume of those sources; a PersistentVolumeClaim's storage is the audit's to check",
		source: "windows-containers-in-kubernetes-docs-v1.24.txt, Persistent storage (NFS; In-tree volume plugins); kubernetes v1.36 cmd/kubelet/app/plugins.go; k8s.io/mount-utils mount_windows.go",
	},
	// The heuristic rows (readiness_heuristics*.go): their detectors recognise only the forms of their
	// tables, one certainty each, so that each reason can say how sure it is.
	{
		rule:   RuleLinuxCommand,
		detect: linuxCommands,
		fields: commandFields,
		reason: "starts a POSIX shell or tool (/bin/sh, bash, sleep, ...), which a Windows image has only if one was added: likely to fail on a Windows node; use a Windows command, or an httpGet or tcpSocket probe",
		why: "a Windows container looks the program up as a Windows executable: /bin/sh is C:\\bin\\sh.exe, and a bare name is searched " +
			"in System32 and the PATH. Probes and hooks run inside the container, so a Linux command there fails or never ends",
		does:   "warns for each exec probe, exec hook and command (args when there is no command) whose program the table lists as likely Linux-only",
		source: "windows-containers-in-kubernetes-docs-v1.27.txt, API compatibility; windows-containers-in-kubernetes-docs-v1.24.txt, Comparison with Linux",
	},
	{
		rule:   RuleLinuxScriptCommand,
		detect: linuxScriptCommands,
		fields: commandFields,
		reason: "starts a shell script, which Windows cannot run as a program: fails on a Windows node whatever the image holds; start a Windows executable (cmd /c, powershell) instead",
		why:    "Windows starts only executables and batch files, and ignores a script's #! line",
		does:   "warns for each exec probe, exec hook and command whose program is a shell script",
		source: "windows-containers-in-kubernetes-docs-v1.27.txt, API compatibility; windows-containers-in-kubernetes-docs-v1.24.txt, Comparison with Linux",
	},
	{
		rule:   RuleLinuxHostPath,
		detect: posixHostPaths,
		fields: []string{"spec.volumes[*].hostPath.path"},
		reason: "mounts a Linux kernel interface or system file, which a Windows node does not have: the kubelet mounts the same path on drive C:, created empty, or the pod waits in ContainerCreating when its type requires the path; give Windows pods their own volume or none",
		why: "the kubelet puts c: before a hostPath with no drive, so /proc is C:\\proc: nothing of the Linux kernel or of a " +
			"distribution's files is there. Paths that work on Windows (the kubelet's own /var/lib/kubelet and /var/log) are not listed",
		does:   "warns for each hostPath volume whose path the table lists as certain",
		source: "windows-containers-in-kubernetes-docs-v1.27.txt, Field compatibility for container specifications; windows-server-containers-guide-v1.9.txt, Volumes; windows-containers-in-kubernetes-docs-v1.24.txt, Persistent storage",
	},
	{
		rule:   RuleLinuxRuntimeHostPath,
		detect: posixRuntimeHostPaths,
		fields: []string{"spec.volumes[*].hostPath.path"},
		reason: "mounts a Linux daemon's runtime state or trust store, which on a Windows node is the same path on drive C: and likely empty (Windows daemons use named pipes and ProgramData); mount the Windows equivalent, such as a named pipe",
		why:    "the same mapping to drive C:, but a Windows port of a daemon may write there (flannel writes C:\\run\\flannel), so the finding is likely, not certain",
		does:   "warns for each hostPath volume whose path the table lists as likely",
		source: "windows-containers-in-kubernetes-docs-v1.24.txt, Persistent storage; kep-windows-node-support.txt, IPC & Pid",
	},
	{
		rule:   RuleHostPathBlockDevice,
		detect: hostPathBlockDevices,
		fields: []string{"spec.volumes[*].hostPath.type"},
		reason: "hostPath type BlockDevice never passes the kubelet's check on Windows: the pod stays in ContainerCreating; Windows cannot attach block devices to pods",
		why:    "the kubelet checks the type with Go's os.Stat, which never reports a block device on Windows",
		does:   "warns for each hostPath volume of type BlockDevice",
		source: "windows-containers-in-kubernetes-docs-v1.24.txt, Persistent storage (block device mapping)",
	},
	{
		rule:   RuleHostPathSocketOrCharDevice,
		detect: hostPathSocketsAndCharDevices,
		fields: []string{"spec.volumes[*].hostPath.type"},
		reason: "hostPath type Socket or CharDevice passes the kubelet's check on Windows only for an AF_UNIX socket or a Windows device at that path: likely the pod stays in ContainerCreating; mount a named pipe with no type instead",
		why:    "Windows daemons listen on named pipes, which the kubelet's type check does not count as sockets; a Linux device path names no Windows device",
		does:   "warns for each hostPath volume of type Socket or CharDevice",
		source: "kep-windows-node-support.txt, IPC & Pid; windows-containers-in-kubernetes-docs-v1.24.txt, Comparison with Linux",
	},
	{
		rule:   RulePartialServiceName,
		detect: partialServiceNames,
		fields: append(append(inContainers(".env[*].value"), inContainers(".command[*]")...), inContainers(".args[*]")...),
		reason: "connects to a Service by a partial name (<name>.<namespace>.svc), which a Windows pod's DNS client does not resolve; use <name>.<namespace>.svc.cluster.local (your cluster domain)",
		why: "Windows pods get one DNS search suffix and treat every dotted name as complete: kubernetes and the full name " +
			"resolve, kubernetes.default and kubernetes.default.svc do not. Only names ending in .svc, where the pod connects " +
			"to them (a URL, dns:///, host:port), are recognised: name.namespace looks exactly like example.com",
		does:   "warns for each env value, command or args element naming one (the host and port are recorded, never the rest of a URL)",
		source: "windows-containers-in-kubernetes-docs-v1.24.txt, DNS; windows-containers-in-kubernetes-docs-v1.17-1.20.txt, DNS",
	},
}

// commandFields are the fields the command rows report: exec probes, exec hooks, command and args.
var commandFields = func() []string {
	var fields []string
	for _, f := range []string{".livenessProbe.exec.command", ".readinessProbe.exec.command", ".startupProbe.exec.command",
		".lifecycle.postStart.exec.command", ".lifecycle.preStop.exec.command", ".command", ".args"} {
		fields = append(fields, inContainers(f)...)
	}
	return fields
}()

// unmountableSources are the inline volume sources of unmountableVolumes, by their JSON names.
var unmountableSources = []struct {
	name string
	of   func(*corev1.VolumeSource) any
}{
	{"nfs", func(v *corev1.VolumeSource) any { return nilIfNone(v.NFS) }},
	{"iscsi", func(v *corev1.VolumeSource) any { return nilIfNone(v.ISCSI) }},
	{"fc", func(v *corev1.VolumeSource) any { return nilIfNone(v.FC) }},
	{"cephfs", func(v *corev1.VolumeSource) any { return nilIfNone(v.CephFS) }},
	{"rbd", func(v *corev1.VolumeSource) any { return nilIfNone(v.RBD) }},
	{"glusterfs", func(v *corev1.VolumeSource) any { return nilIfNone(v.Glusterfs) }},
	{"quobyte", func(v *corev1.VolumeSource) any { return nilIfNone(v.Quobyte) }},
	{"storageos", func(v *corev1.VolumeSource) any { return nilIfNone(v.StorageOS) }},
	{"scaleIO", func(v *corev1.VolumeSource) any { return nilIfNone(v.ScaleIO) }},
	{"flocker", func(v *corev1.VolumeSource) any { return nilIfNone(v.Flocker) }},
	{"photonPersistentDisk", func(v *corev1.VolumeSource) any { return nilIfNone(v.PhotonPersistentDisk) }},
}

// nilIfNone turns a nil pointer into a nil interface, so that a source the volume lacks compares equal
// to nil.
func nilIfNone[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}

var unmountableVolumeFields = func() []string {
	fields := make([]string, len(unmountableSources))
	for i, s := range unmountableSources {
		fields[i] = "spec.volumes[*]." + s.name
	}
	return fields
}()

var volumeFileModeFields = []string{
	"spec.volumes[*].secret.defaultMode", "spec.volumes[*].secret.items[*].mode",
	"spec.volumes[*].configMap.defaultMode", "spec.volumes[*].configMap.items[*].mode",
	"spec.volumes[*].downwardAPI.defaultMode", "spec.volumes[*].downwardAPI.items[*].mode",
	"spec.volumes[*].projected.defaultMode",
	"spec.volumes[*].projected.sources[*].secret.items[*].mode",
	"spec.volumes[*].projected.sources[*].configMap.items[*].mode",
	"spec.volumes[*].projected.sources[*].downwardAPI.items[*].mode",
}

// checkReadiness records a warning for every finding of every row, in the table's order.
func checkReadiness(spec *corev1.PodSpec, rec *recorder) {
	for i := range readinessChecks {
		row := &readinessChecks[i]
		for _, f := range row.detect(spec) {
			rec.add(Change{Action: Warn, Path: f.Path, From: f.Value, Reason: row.reason, Rule: row.rule})
		}
	}
}

func memoryWithoutLimit(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	forEachPlacingContainer(spec, func(at containerAt, c *corev1.Container) {
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok && !found.full() {
			found.add(at.path(".resources.limits.memory"), nil)
		}
	})
	return found
}

func memoryRequestNotLimit(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	forEachPlacingContainer(spec, func(at containerAt, c *corev1.Container) {
		limit, limited := c.Resources.Limits[corev1.ResourceMemory]
		request, requested := c.Resources.Requests[corev1.ResourceMemory]
		if limited && requested && request.Cmp(limit) != 0 && !found.full() {
			found.add(at.path(".resources.requests.memory"), jsonValue(request))
		}
	})
	return found
}

// windowsRootUser is the user the kubelet treats as root on Windows, compared without case.
const windowsRootUser = "ContainerAdministrator"

// forEachNonRootContainer visits each container whose effective runAsNonRoot is true, with its effective
// Windows user (nil for none): a container's own setting, else the pod's, as the kubelet merges them.
func forEachNonRootContainer(spec *corev1.PodSpec, visit func(at containerAt, user *string)) {
	if HostProcess(spec) {
		return
	}
	var podNonRoot *bool
	var podUser *string
	if sc := spec.SecurityContext; sc != nil {
		podNonRoot = sc.RunAsNonRoot
		if sc.WindowsOptions != nil {
			podUser = sc.WindowsOptions.RunAsUserName
		}
	}
	forEachContainer(spec, func(at containerAt, c *corev1.Container) {
		nonRoot, user := podNonRoot, podUser
		if sc := c.SecurityContext; sc != nil {
			if sc.RunAsNonRoot != nil {
				nonRoot = sc.RunAsNonRoot
			}
			if sc.WindowsOptions != nil && sc.WindowsOptions.RunAsUserName != nil {
				user = sc.WindowsOptions.RunAsUserName
			}
		}
		if nonRoot != nil && *nonRoot {
			visit(at, user)
		}
	})
}

func nonRootWithoutUser(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	forEachNonRootContainer(spec, func(at containerAt, user *string) {
		if user == nil && !found.full() {
			found.add(at.path(".securityContext.runAsNonRoot"), jsonValue(true))
		}
	})
	return found
}

func nonRootAsAdmin(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	forEachNonRootContainer(spec, func(at containerAt, user *string) {
		if user != nil && strings.EqualFold(*user, windowsRootUser) && !found.full() {
			found.add(at.path(".securityContext.windowsOptions.runAsUserName"), jsonValue(*user))
		}
	})
	return found
}

func subPathMounts(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	forEachContainer(spec, func(at containerAt, c *corev1.Container) {
		for i := range c.VolumeMounts {
			if found.full() {
				return
			}
			m := &c.VolumeMounts[i]
			mount := ".volumeMounts[" + clipName(m.MountPath) + "]"
			if m.SubPath != "" {
				found.add(at.path(mount+".subPath"), recordString(m.SubPath))
			}
			if m.SubPathExpr != "" {
				found.add(at.path(mount+".subPathExpr"), recordString(m.SubPathExpr))
			}
		}
	})
	return found
}

// defaultFileMode is the defaultMode the API server gives Secret, ConfigMap, downward API and projected
// volumes that set none (0644).
const defaultFileMode = 0o644

func volumeFileModes(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	defaultMode := func(at string, mode *int32) {
		if mode != nil && *mode != defaultFileMode {
			found.add(at+".defaultMode", jsonValue(*mode))
		}
	}
	keyModes := func(at string, items []corev1.KeyToPath) {
		for i := range items {
			if it := &items[i]; it.Mode != nil && !found.full() {
				found.add(named(at+".items", it.Key)+".mode", jsonValue(*it.Mode))
			}
		}
	}
	fileModes := func(at string, items []corev1.DownwardAPIVolumeFile) {
		for i := range items {
			if it := &items[i]; it.Mode != nil && !found.full() {
				found.add(named(at+".items", it.Path)+".mode", jsonValue(*it.Mode))
			}
		}
	}
	for i := range spec.Volumes {
		if found.full() {
			break
		}
		v := &spec.Volumes[i]
		switch {
		case v.Secret != nil:
			at := volumePath(v.Name, ".secret")
			defaultMode(at, v.Secret.DefaultMode)
			keyModes(at, v.Secret.Items)
		case v.ConfigMap != nil:
			at := volumePath(v.Name, ".configMap")
			defaultMode(at, v.ConfigMap.DefaultMode)
			keyModes(at, v.ConfigMap.Items)
		case v.DownwardAPI != nil:
			at := volumePath(v.Name, ".downwardAPI")
			defaultMode(at, v.DownwardAPI.DefaultMode)
			fileModes(at, v.DownwardAPI.Items)
		case v.Projected != nil:
			at := volumePath(v.Name, ".projected")
			defaultMode(at, v.Projected.DefaultMode)
			for j := range v.Projected.Sources {
				if found.full() {
					break
				}
				src := &v.Projected.Sources[j]
				// Projected sources have no name of their own: the index names them.
				sat := indexed(at+".sources", j)
				switch {
				case src.Secret != nil:
					keyModes(sat+".secret", src.Secret.Items)
				case src.ConfigMap != nil:
					keyModes(sat+".configMap", src.ConfigMap.Items)
				case src.DownwardAPI != nil:
					fileModes(sat+".downwardAPI", src.DownwardAPI.Items)
				}
			}
		}
	}
	return found
}

func secretVolumes(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	for i := range spec.Volumes {
		if found.full() {
			break
		}
		v := &spec.Volumes[i]
		if v.Secret != nil {
			found.add(volumePath(v.Name, ".secret"), jsonValue(clipName(v.Secret.SecretName)))
		}
		if v.Projected != nil {
			for j := range v.Projected.Sources {
				if s := v.Projected.Sources[j].Secret; s != nil && !found.full() {
					found.add(indexed(volumePath(v.Name, ".projected.sources"), j)+".secret", jsonValue(clipName(s.Name)))
				}
			}
		}
	}
	return found
}

func unmountableVolumes(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		for _, s := range unmountableSources {
			if found.full() {
				return found
			}
			if src := s.of(&v.VolumeSource); src != nil {
				found.add(volumePath(v.Name, "."+s.name), recordJSON(src))
			}
		}
	}
	return found
}

// ReadinessRules are the rules of the run-time readiness table, in its order: what a reader of the
// records (the audit) needs to tell a readiness warning from the others (RuleOf) and to name one
// finding per rule, so that a new row of the table needs no edit there.
func ReadinessRules() []Rule {
	rules := make([]Rule, len(readinessChecks))
	for i := range readinessChecks {
		rules[i] = readinessChecks[i].rule
	}
	return rules
}
