package policy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzReadinessHeuristics runs every detector on pods made of arbitrary strings, in every field they
// read: they never panic, stay within their bounds, give the same answer twice, record valid JSON, and
// never report a Windows form or record a URL's password.
func FuzzReadinessHeuristics(f *testing.F) {
	f.Add("/bin/sh", "-c", "exec pg_isready -U postgres", "/proc", "", "app", uint8(0))
	f.Add("powershell.exe", "C:\\var\\lib\\kubelet\\", "postgres://u:pw@db.data.svc:5432/x", "\\\\.\\pipe\\docker_engine", "Socket", "v", uint8(1))
	f.Add("/docker-entrypoint.sh", "--url=http://grafana.$(POD_NAMESPACE).svc:$(P)/", "dns:///etcd.db.svc:2379", "/var/run/docker.sock", "BlockDevice", "a]b", uint8(2))
	f.Add("sleep", "cert-manager-webhook.$(POD_NAMESPACE).svc", "x.ns.svc.:80,y.ns.svc:1", "/run/log/journal", "CharDevice", "", uint8(3))
	f.Add("", "", "", "", "", "", uint8(255))
	f.Add("/bin/.EXE", "//./pipe/x", "", "/", "Directory", "x", uint8(0))
	f.Fuzz(func(t *testing.T, program, arg, env, hostPath, hostPathType, name string, knobs uint8) {
		argv := []string{program, arg, env}
		handler := corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: argv}}
		probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: argv}}}
		c := corev1.Container{
			Name: name, Args: []string{arg, env, program},
			Env:            []corev1.EnvVar{{Name: name, Value: env}, {Name: arg, Value: arg}},
			LivenessProbe:  probe,
			ReadinessProbe: probe,
			StartupProbe:   probe,
			Lifecycle:      &corev1.Lifecycle{PostStart: &handler, PreStop: &handler},
		}
		if knobs&1 == 0 {
			c.Command = argv // else args are the entrypoint
		}
		typ := corev1.HostPathType(hostPathType)
		spec := &corev1.PodSpec{
			InitContainers:      []corev1.Container{c},
			Containers:          []corev1.Container{c, {Name: "empty", Command: []string{}, LivenessProbe: &corev1.Probe{}}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)}},
			Volumes: []corev1.Volume{
				{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostPath, Type: &typ}}},
				{Name: "nil-type", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostPath}}},
				{Name: "not-a-host-path", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		}
		if knobs&2 != 0 {
			for range 40 { // past the cap
				spec.Containers = append(spec.Containers, c)
				spec.Volumes = append(spec.Volumes, spec.Volumes[0])
			}
		}
		for _, d := range heuristicDetectors {
			got := d.detect(spec)
			if len(got) > maxFindingsPerRow {
				t.Fatalf("%s: %d findings, more than %d", d.name, len(got), maxFindingsPerRow)
			}
			if again := d.detect(spec); !slices.EqualFunc(got, again, func(a, b readinessFinding) bool {
				return a.Path == b.Path && string(a.Value) == string(b.Value)
			}) {
				t.Fatalf("%s: two runs disagree", d.name)
			}
			for _, f := range got {
				if !strings.HasPrefix(f.Path, "spec.") || !json.Valid(f.Value) {
					t.Fatalf("%s: bad finding %q = %s", d.name, f.Path, f.Value)
				}
				if limit := 2 * (6*maxRecordedBytes + 3); len(f.Value) > limit {
					t.Fatalf("%s %s: a value of %d bytes", d.name, f.Path, len(f.Value))
				}
			}
		}
		checkHeuristicClaims(t, spec, program, hostPath)
	})
}

// checkHeuristicClaims holds the findings to what the tables promise about the fuzzer's strings.
func checkHeuristicClaims(t *testing.T, spec *corev1.PodSpec, program, hostPath string) {
	t.Helper()
	windowsProgram := strings.ContainsRune(program, '\\') || hasSuffixFold(program, ".exe") ||
		len(program) >= 2 && program[1] == ':' && isASCIILetter(program[0])
	for _, f := range append(linuxCommands(spec), linuxScriptCommands(spec)...) {
		var recorded []string
		if err := json.Unmarshal(f.Value, &recorded); err != nil || len(recorded) == 0 {
			t.Fatalf("%s: recorded %s, not a command", f.Path, f.Value)
		}
		// Probes, hooks and command start with program; args, when they are the entrypoint, with arg.
		if windowsProgram && !strings.HasSuffix(f.Path, ".args") {
			t.Fatalf("%s: the Windows program %q was reported", f.Path, program)
		}
	}
	windowsPath := !strings.HasPrefix(hostPath, "/") || strings.HasPrefix(hostPath, "//")
	for _, f := range append(posixHostPaths(spec), posixRuntimeHostPaths(spec)...) {
		if windowsPath {
			t.Fatalf("%s: the Windows path %q was reported", f.Path, hostPath)
		}
	}
	for _, f := range partialServiceNames(spec) {
		var name string
		if err := json.Unmarshal(f.Value, &name); err != nil {
			t.Fatalf("%s: recorded %s, not a name", f.Path, f.Value)
		}
		if strings.Contains(name, "@") || !strings.Contains(strings.ToLower(name), "svc") {
			t.Fatalf("%s: recorded %q: a password, or no Service name", f.Path, name)
		}
	}
}
