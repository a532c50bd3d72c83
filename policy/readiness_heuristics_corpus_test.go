package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// corpusHeuristics is every finding of the detectors on the shared corpus of rendered charts, by
// workload; a workload it does not name must have none. So the Windows workloads of the Windows-aware
// charts (csi-driver-smb's csi-smb-node-win, datadog's DaemonSet with targetSystem=windows,
// secrets-store-csi-driver-windows, windows-exporter) are held to no finding, while that datadog
// rendering's cluster agent, which it also sends to Windows nodes, is reported for its `cp -r` init
// container. The detectors run on every workload here, Linux ones included: which pods they apply to
// is the readiness table's business.
var corpusHeuristics = map[string][]string{
	"argo-cd.yaml Deployment/argo-cd-argocd-applicationset-controller": {
		`linuxCommands spec.containers[applicationset-controller].args = ["/usr/local/bin/argocd-applicationset-controller","…"]`,
	},
	"argo-cd.yaml Deployment/argo-cd-argocd-notifications-controller": {
		`linuxCommands spec.containers[notifications-controller].args = ["/usr/local/bin/argocd-notifications","…"]`,
	},
	"argo-cd.yaml Deployment/argo-cd-argocd-repo-server": {
		`linuxCommands spec.initContainers[copyutil].command = ["sh","…"]`,
		`linuxCommands spec.containers[repo-server].args = ["/usr/local/bin/argocd-repo-server","…"]`,
	},
	"argo-cd.yaml Deployment/argo-cd-argocd-server": {
		`linuxCommands spec.containers[server].args = ["/usr/local/bin/argocd-server","…"]`,
	},
	"argo-cd.yaml Deployment/argo-cd-argocd-dex-server": {
		`linuxCommands spec.initContainers[copyutil].command = ["/bin/cp","…"]`,
	},
	"argo-cd.yaml StatefulSet/argo-cd-argocd-application-controller": {
		`linuxCommands spec.containers[application-controller].args = ["/usr/local/bin/argocd-application-controller","…"]`,
	},
	"bitnami-nginx.yaml Deployment/nginx": {
		`linuxCommands spec.initContainers[preserve-logs-symlinks].command = ["/bin/bash"]`,
	},
	"bitnami-postgresql.yaml StatefulSet/postgresql": {
		`linuxCommands spec.containers[postgresql].livenessProbe.exec.command = ["/bin/sh","…"]`,
		`linuxCommands spec.containers[postgresql].readinessProbe.exec.command = ["/bin/sh","…"]`,
	},
	"datadog-windows.yaml Deployment/datadog-cluster-agent": {
		`linuxCommands spec.initContainers[init-volume].command = ["cp","…"]`,
	},
	"datadog.yaml DaemonSet/datadog": {
		`linuxCommands spec.initContainers[init-volume].command = ["bash","…"]`,
		`linuxCommands spec.initContainers[init-config].command = ["bash","…"]`,
		`linuxCommands spec.initContainers[seccomp-setup].command = ["cp","…"]`,
		`posixHostPaths spec.volumes[procdir].hostPath.path = "/proc"`,
		`posixHostPaths spec.volumes[cgroups].hostPath.path = "/sys/fs/cgroup"`,
		`posixHostPaths spec.volumes[os-release-file].hostPath.path = "/etc/os-release"`,
		`posixHostPaths spec.volumes[etc-redhat-release].hostPath.path = "/etc/redhat-release"`,
		`posixHostPaths spec.volumes[etc-fedora-release].hostPath.path = "/etc/fedora-release"`,
		`posixHostPaths spec.volumes[etc-lsb-release].hostPath.path = "/etc/lsb-release"`,
		`posixHostPaths spec.volumes[etc-system-release].hostPath.path = "/etc/system-release"`,
		`posixHostPaths spec.volumes[seccomp-root].hostPath.path = "/var/lib/kubelet/seccomp"`,
		`posixHostPaths spec.volumes[debugfs].hostPath.path = "/sys/kernel/debug"`,
		`posixHostPaths spec.volumes[modules].hostPath.path = "/lib/modules"`,
		`posixHostPaths spec.volumes[src].hostPath.path = "/usr/src"`,
		`posixHostPaths spec.volumes[apt-config-dir].hostPath.path = "/etc/apt"`,
		`posixHostPaths spec.volumes[yum-repos-dir].hostPath.path = "/etc/yum.repos.d"`,
		`posixHostPaths spec.volumes[opensuse-repos-dir].hostPath.path = "/etc/zypp"`,
		`posixHostPaths spec.volumes[yum-vars-dir].hostPath.path = "/etc/yum/vars"`,
		`posixHostPaths spec.volumes[dnf-vars-dir].hostPath.path = "/etc/dnf/vars"`,
		`posixHostPaths spec.volumes[rhel-subscription-dir].hostPath.path = "/etc/rhsm"`,
		`posixHostPaths spec.volumes[passwd].hostPath.path = "/etc/passwd"`,
		`posixRuntimeHostPaths spec.volumes[dsdsocket].hostPath.path = "/var/run/datadog"`,
		`posixRuntimeHostPaths spec.volumes[apmsocket].hostPath.path = "/var/run/datadog"`,
		`posixRuntimeHostPaths spec.volumes[public-key-dir].hostPath.path = "/etc/pki"`,
		`posixRuntimeHostPaths spec.volumes[runtimesocketdir].hostPath.path = "/var/run"`,
	},
	"datadog.yaml Deployment/datadog-cluster-agent": {
		`linuxCommands spec.initContainers[init-volume].command = ["cp","…"]`,
	},
	"fluent-bit.yaml DaemonSet/fluent-bit": {
		`posixHostPaths spec.volumes[etcmachineid].hostPath.path = "/etc/machine-id"`,
		`posixRuntimeHostPaths spec.volumes[varlibdockercontainers].hostPath.path = "/var/lib/docker/containers"`,
	},
	"fluent-bit.yaml Pod/fluent-bit-test-connection": {
		`linuxCommands spec.containers[wget].command = ["sh"]`,
	},
	"prometheus-node-exporter.yaml DaemonSet/prometheus-node-exporter": {
		`posixHostPaths spec.volumes[proc].hostPath.path = "/proc"`,
		`posixHostPaths spec.volumes[sys].hostPath.path = "/sys"`,
	},
	"promtail.yaml DaemonSet/promtail": {
		`posixRuntimeHostPaths spec.volumes[run].hostPath.path = "/run/promtail"`,
		`posixRuntimeHostPaths spec.volumes[containers].hostPath.path = "/var/lib/docker/containers"`,
	},
	"secrets-store-csi-driver-windows.yaml DaemonSet/secrets-store-csi-driver": {
		`posixRuntimeHostPaths spec.volumes[providers-dir].hostPath.path = "/var/run/secrets-store-csi-providers"`,
	},
	"secrets-store-csi-driver.yaml DaemonSet/secrets-store-csi-driver": {
		`posixRuntimeHostPaths spec.volumes[providers-dir].hostPath.path = "/var/run/secrets-store-csi-providers"`,
	},
}

// TestReadinessHeuristicsOnCorpus runs the detectors on every workload of ../shared/corpus (it sits
// beside the repository; the test is skipped without it) and compares with corpusHeuristics.
func TestReadinessHeuristicsOnCorpus(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "corpus", "charts")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Skipf("no shared corpus at %s", dir)
	}
	seen := map[string]bool{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var doc struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Spec     json.RawMessage `json:"spec"`
				Template json.RawMessage `json:"template"` // a PodTemplate's
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if doc.Kind == "PodTemplate" {
				doc.Spec, _ = json.Marshal(map[string]json.RawMessage{"template": doc.Template})
			}
			spec := corpusPodSpec(t, doc.Kind, doc.Spec)
			if spec == nil {
				continue
			}
			key := filepath.Base(file) + " " + doc.Kind + "/" + doc.Metadata.Name
			seen[key] = true
			got := renderHeuristics(spec)
			if want := corpusHeuristics[key]; !slices.Equal(got, want) {
				t.Errorf("%s: got\n  %s\nwant\n  %s", key, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		}
	}
	for key := range corpusHeuristics {
		if !seen[key] {
			t.Errorf("%s: no such workload in the corpus", key)
		}
	}
}

// corpusPodSpec is the pod spec of a corpus object: the Pod's own, a CronJob's job template's, the
// template's of the other workloads (a PodTemplate's is passed as if in spec); nil for objects that
// hold none.
func corpusPodSpec(t *testing.T, kind string, raw json.RawMessage) *corev1.PodSpec {
	t.Helper()
	var holder struct {
		Template *struct {
			Spec corev1.PodSpec `json:"spec"`
		} `json:"template"`
		JobTemplate *struct {
			Spec struct {
				Template struct {
					Spec corev1.PodSpec `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	}
	switch kind {
	case "Pod":
		var spec corev1.PodSpec
		if err := json.Unmarshal(raw, &spec); err != nil {
			t.Fatal(err)
		}
		return &spec
	}
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, &holder); err != nil {
		t.Fatal(err)
	}
	switch {
	case holder.JobTemplate != nil:
		return &holder.JobTemplate.Spec.Template.Spec
	case holder.Template != nil:
		return &holder.Template.Spec
	}
	return nil
}
