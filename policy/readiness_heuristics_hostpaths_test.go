package policy

import "testing"

// TestHostPaths holds the host path tables to the corpus's hostPath volumes: Linux DaemonSets' (datadog,
// fluent-bit, promtail, node-exporter) and the Windows forms of the Windows-aware charts.
func TestHostPaths(t *testing.T) {
	runHeuristicCases(t, []heuristicCase{
		{"datadog agent", `
containers: [{name: agent}]
volumes:
- {name: procdir, hostPath: {path: /proc}}
- {name: cgroups, hostPath: {path: /sys/fs/cgroup}}
- {name: os-release-file, hostPath: {path: /etc/os-release}}
- {name: dsdsocket, hostPath: {path: /var/run/datadog, type: DirectoryOrCreate}}
- {name: seccomp-root, hostPath: {path: /var/lib/kubelet/seccomp}}
- {name: modules, hostPath: {path: /lib/modules}}
- {name: src, hostPath: {path: /usr/src}}
- {name: public-key-dir, hostPath: {path: /etc/pki}}
- {name: passwd, hostPath: {path: /etc/passwd}}
- {name: runtimesocketdir, hostPath: {path: /var/run}}
- {name: runtime-compiler-output-dir, hostPath: {path: /var/tmp/datadog-agent/system-probe/build, type: DirectoryOrCreate}}
`, []string{
			`posixHostPaths spec.volumes[procdir].hostPath.path = "/proc"`,
			`posixHostPaths spec.volumes[cgroups].hostPath.path = "/sys/fs/cgroup"`,
			`posixHostPaths spec.volumes[os-release-file].hostPath.path = "/etc/os-release"`,
			`posixHostPaths spec.volumes[seccomp-root].hostPath.path = "/var/lib/kubelet/seccomp"`,
			`posixHostPaths spec.volumes[modules].hostPath.path = "/lib/modules"`,
			`posixHostPaths spec.volumes[src].hostPath.path = "/usr/src"`,
			`posixHostPaths spec.volumes[passwd].hostPath.path = "/etc/passwd"`,
			`posixRuntimeHostPaths spec.volumes[dsdsocket].hostPath.path = "/var/run/datadog"`,
			`posixRuntimeHostPaths spec.volumes[public-key-dir].hostPath.path = "/etc/pki"`,
			`posixRuntimeHostPaths spec.volumes[runtimesocketdir].hostPath.path = "/var/run"`,
		}},
		{"fluent-bit and promtail: the kubelet's own log and state directories are Windows ones too", `
containers: [{name: fluent-bit}]
volumes:
- {name: varlog, hostPath: {path: /var/log}}
- {name: pods, hostPath: {path: /var/log/pods}}
- {name: varlibdockercontainers, hostPath: {path: /var/lib/docker/containers}}
- {name: etcmachineid, hostPath: {path: /etc/machine-id, type: File}}
- {name: run, hostPath: {path: /run/promtail}}
- {name: kubelet, hostPath: {path: /var/lib/kubelet/, type: DirectoryOrCreate}}
- {name: root, hostPath: {path: /}}
`, []string{
			`posixHostPaths spec.volumes[etcmachineid].hostPath.path = "/etc/machine-id"`,
			`posixRuntimeHostPaths spec.volumes[varlibdockercontainers].hostPath.path = "/var/lib/docker/containers"`,
			`posixRuntimeHostPaths spec.volumes[run].hostPath.path = "/run/promtail"`,
		}},
		{"the longest prefix decides, and paths are cleaned first", `
containers: [{name: a}]
volumes:
- {name: journal, hostPath: {path: /run/log/journal}}
- {name: journal2, hostPath: {path: /var/log/journal/}}
- {name: dotdot, hostPath: {path: /proc/../etc/ssl/certs}}
- {name: notproc, hostPath: {path: /procfoo}}
- {name: etc, hostPath: {path: /etc}}
- {name: cni, hostPath: {path: /etc/cni/net.d}}
- {name: cnibin, hostPath: {path: /opt/cni/bin}}
- {name: kubernetes, hostPath: {path: /etc/kubernetes/secrets-store-csi-providers, type: DirectoryOrCreate}}
`, []string{
			`posixHostPaths spec.volumes[journal].hostPath.path = "/run/log/journal"`,
			`posixHostPaths spec.volumes[journal2].hostPath.path = "/var/log/journal/"`,
			`posixRuntimeHostPaths spec.volumes[dotdot].hostPath.path = "/proc/../etc/ssl/certs"`,
		}},
		{"Windows forms from the corpus are never reported", `
containers: [{name: a}]
volumes:
- {name: csi-proxy-fs-pipe-v1, hostPath: {path: "\\\\.\\pipe\\csi-proxy-filesystem-v1"}}
- {name: runtimesocket, hostPath: {path: "\\\\.\\pipe\\docker_engine"}}
- {name: registration-dir, hostPath: {path: "C:\\var\\lib\\kubelet\\plugins_registry\\", type: Directory}}
- {name: providers-dir, hostPath: {path: "C:\\k\\secrets-store-csi-providers", type: DirectoryOrCreate}}
- {name: programdata, hostPath: {path: "C:/ProgramData/docker"}}
- {name: slash-pipe, hostPath: {path: "//./pipe/containerd-containerd"}}
- {name: rooted, hostPath: {path: "\\var\\log"}}
- {name: relative, hostPath: {path: "proc"}}
`, nil},
		{"types the kubelet cannot find on Windows", `
containers: [{name: a}]
volumes:
- {name: disk, hostPath: {path: /dev/sdb, type: BlockDevice}}
- {name: docker, hostPath: {path: /var/run/docker.sock, type: Socket}}
- {name: kmsg, hostPath: {path: /dev/kmsg, type: CharDevice}}
- {name: pipe, hostPath: {path: "\\\\.\\pipe\\docker_engine", type: Socket}}
- {name: dir, hostPath: {path: "C:\\data", type: Directory}}
- {name: unset, hostPath: {path: "C:\\data", type: ""}}
`, []string{
			`posixHostPaths spec.volumes[disk].hostPath.path = "/dev/sdb"`,
			`posixHostPaths spec.volumes[kmsg].hostPath.path = "/dev/kmsg"`,
			`posixRuntimeHostPaths spec.volumes[docker].hostPath.path = "/var/run/docker.sock"`,
			`hostPathBlockDevices spec.volumes[disk].hostPath.type = "BlockDevice"`,
			`hostPathSocketsAndCharDevices spec.volumes[docker].hostPath.type = "Socket"`,
			`hostPathSocketsAndCharDevices spec.volumes[kmsg].hostPath.type = "CharDevice"`,
			`hostPathSocketsAndCharDevices spec.volumes[pipe].hostPath.type = "Socket"`,
		}},
	})
}

// TestHostPathFormsTable checks that every prefix is listed once and recognised, with what is under it,
// with its row's certainty.
func TestHostPathFormsTable(t *testing.T) {
	prefixes := map[string]bool{}
	for _, f := range hostPathForms {
		if prefixes[f.prefix] {
			t.Errorf("host path %s is listed twice", f.prefix)
		}
		prefixes[f.prefix] = true
		for _, p := range []string{f.prefix, f.prefix + "/x", f.prefix + "/"} {
			if got, ok := classifyHostPath(p); !ok || got != f.certainty {
				t.Errorf("%s: got %v, %v; want %v", p, got, ok, f.certainty)
			}
		}
	}
}
