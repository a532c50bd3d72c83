package policy

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// What a Windows node does with a hostPath (kubernetes v1.36.3): the kubelet puts c: before a path that
// starts with / or \ and names no drive, such as /var/log (pkg/kubelet/kubelet_pods.go makeMounts,
// volumeutil.MakeAbsolutePath), so the container gets C:\var\log; containerd creates a
// missing source directory (internal/cri/opts/spec_windows_opts.go parseMount) and leaves \\.\pipe\
// paths alone. Before that the hostPath plugin checks the volume's type (pkg/volume/hostpath checkType,
// through pkg/volume/util/hostutil's Windows GetFileType): a missing path fails every type but the
// OrCreate ones, and the pod waits in ContainerCreating.
//
// So a POSIX path is not wrong in itself: the Windows kubelet's own directories are C:\var\lib\kubelet
// and C:\var\log\pods, which /var/lib/kubelet and /var/log reach. Only the paths of the table are
// reported: those whose content on Linux comes from the kernel, the distribution or a Linux daemon.

// hostPathForm is one row of the table of host paths recognised as Linux-only: prefix and everything
// under it.
type hostPathForm struct {
	prefix    string
	certainty certainty
	what      string
}

// hostPathForms is the one table of Linux host paths. The longest matching prefix decides, so that
// /run/log/journal (the journal, certain) is not read as /run (runtime state, likely).
var hostPathForms = []hostPathForm{
	// Kernel interfaces: Windows has no procfs, sysfs or device nodes at any path.
	{"/proc", certain, "procfs"},
	{"/sys", certain, "sysfs: cgroups, BPF, debugfs"},
	{"/dev", certain, "device nodes"},
	{"/lib/modules", certain, "kernel modules"},
	{"/usr/lib/modules", certain, "kernel modules"},
	{"/usr/src", certain, "kernel headers"},
	{"/boot", certain, "the kernel and its configuration"},
	{"/var/lib/kubelet/seccomp", certain, "seccomp profiles"},
	// What a Linux distribution writes: Windows keeps identity, users and time zone in the registry
	// and the SAM, and has no package manager configuration.
	{"/var/log/journal", certain, "the systemd journal"},
	{"/run/log/journal", certain, "the systemd journal"},
	{"/etc/machine-id", certain, "the machine ID"},
	{"/var/lib/dbus/machine-id", certain, "the machine ID"},
	{"/etc/os-release", certain, "the distribution's release file"},
	{"/usr/lib/os-release", certain, "the distribution's release file"},
	{"/etc/lsb-release", certain, "the distribution's release file"},
	{"/etc/redhat-release", certain, "the distribution's release file"},
	{"/etc/fedora-release", certain, "the distribution's release file"},
	{"/etc/system-release", certain, "the distribution's release file"},
	{"/etc/passwd", certain, "Linux users"},
	{"/etc/group", certain, "Linux groups"},
	{"/etc/shadow", certain, "Linux passwords"},
	{"/etc/localtime", certain, "the time zone"},
	{"/etc/apt", certain, "package manager configuration"},
	{"/etc/yum", certain, "package manager configuration"},
	{"/etc/yum.repos.d", certain, "package manager configuration"},
	{"/etc/dnf", certain, "package manager configuration"},
	{"/etc/zypp", certain, "package manager configuration"},
	{"/etc/rhsm", certain, "package manager configuration"},
	// Runtime state of Linux daemons: their Windows ports listen on named pipes and keep state in
	// C:\ProgramData, but one may write the Linux path (flannel for Windows writes C:\run\flannel).
	{"/run", likely, "runtime state and sockets of Linux daemons"},
	{"/var/run", likely, "runtime state and sockets of Linux daemons"},
	{"/var/lib/docker", likely, "Docker's state (C:\\ProgramData\\docker on Windows)"},
	{"/var/lib/containerd", likely, "containerd's state (C:\\ProgramData\\containerd on Windows)"},
	{"/var/lib/containers", likely, "CRI-O and Podman state"},
	// Trust stores: Windows keeps certificates in its certificate store.
	{"/etc/ssl", likely, "the distribution's certificates"},
	{"/etc/pki", likely, "the distribution's certificates and keys"},
	{"/usr/share/ca-certificates", likely, "the distribution's certificates"},
}

// classifyHostPath says how sure the table is that the host path p holds nothing of what it holds on
// Linux, and false when no row names it. A path that does not start with a single / is a Windows form
// (C:\..., \\.\pipe\..., //./pipe/..., \var\log) or relative, and never reported.
func classifyHostPath(p string) (certainty, bool) {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return windowsForm, false
	}
	p = path.Clean(p)
	best := -1
	for i, f := range hostPathForms {
		if (p == f.prefix || strings.HasPrefix(p, f.prefix) && p[len(f.prefix)] == '/') &&
			(best < 0 || len(f.prefix) > len(hostPathForms[best].prefix)) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	return hostPathForms[best].certainty, true
}

// hostPathFindings reports the hostPath volumes whose path the table recognises with exactly want.
func hostPathFindings(spec *corev1.PodSpec, want certainty) []readinessFinding {
	var found findingList
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		if got, ok := classifyHostPath(v.HostPath.Path); ok && got == want {
			if !found.add(volumePath(v.Name, ".hostPath.path"), recordString(v.HostPath.Path)) {
				break
			}
		}
	}
	return found
}

// posixHostPaths finds hostPath volumes of Linux kernel interfaces and distribution files (/proc, /sys,
// /dev, /etc/machine-id, ...): a Windows node certainly has nothing of them at C:\proc and the like.
func posixHostPaths(spec *corev1.PodSpec) []readinessFinding { return hostPathFindings(spec, certain) }

// posixRuntimeHostPaths finds hostPath volumes of Linux daemons' runtime state and of trust stores
// (/run, /var/run/docker.sock, /var/lib/docker, /etc/ssl): likely empty on a Windows node, not certain.
func posixRuntimeHostPaths(spec *corev1.PodSpec) []readinessFinding {
	return hostPathFindings(spec, likely)
}

// hostPathTypeForm is one row of the table of hostPath types the kubelet checks before mounting, and
// how sure it is that the check fails on Windows.
type hostPathTypeForm struct {
	hostPathType corev1.HostPathType
	certainty    certainty
	why          string
}

// hostPathTypeForms: the Windows kubelet classifies the path with Go's os.Stat, which reports a
// character device (ModeDevice|ModeCharDevice) for a Windows console or device handle, a socket only
// for an AF_UNIX socket file, a named pipe as neither, and never a block device. The other types
// (Directory, File and their OrCreate forms) are checked alike on both systems and are not listed.
var hostPathTypeForms = []hostPathTypeForm{
	{corev1.HostPathBlockDev, certain, "the check never passes on Windows: os.Stat reports no block devices there"},
	{corev1.HostPathSocket, likely, "passes only for an AF_UNIX socket file; Windows daemons listen on named pipes, which are not sockets to the check"},
	{corev1.HostPathCharDev, likely, "passes only for a Windows character device (NUL, CON, a COM port); a Linux device path has none"},
}

// hostPathTypeFindings reports the hostPath volumes whose type the table lists with exactly want.
func hostPathTypeFindings(spec *corev1.PodSpec, want certainty) []readinessFinding {
	var found findingList
	for _, v := range spec.Volumes {
		if v.HostPath == nil || v.HostPath.Type == nil {
			continue
		}
		for _, f := range hostPathTypeForms {
			if f.hostPathType == *v.HostPath.Type && f.certainty == want {
				if !found.add(volumePath(v.Name, ".hostPath.type"), jsonValue(f.hostPathType)) {
					return found
				}
			}
		}
	}
	return found
}

// hostPathBlockDevices finds hostPath volumes of type BlockDevice: the kubelet's type check certainly
// fails on Windows, and the pod never starts.
func hostPathBlockDevices(spec *corev1.PodSpec) []readinessFinding {
	return hostPathTypeFindings(spec, certain)
}

// hostPathSocketsAndCharDevices finds hostPath volumes of type Socket or CharDevice: the kubelet's type
// check likely fails on Windows (it passes for an AF_UNIX socket or a Windows device at that path).
func hostPathSocketsAndCharDevices(spec *corev1.PodSpec) []readinessFinding {
	return hostPathTypeFindings(spec, likely)
}
