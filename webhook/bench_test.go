package webhook

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/wincompat/wincompat/policy"
)

// benchPod renders a Windows pod with n containers carrying what real charts carry: Linux security
// defaults, resources, probes, env and mounts.
func benchPod(n int) []byte {
	containers := make([]string, n)
	for i := range containers {
		containers[i] = fmt.Sprintf(`{"name":"c%d","image":"mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
		"ports":[{"name":"http","containerPort":%d,"protocol":"TCP"}],
		"env":[{"name":"LOG_LEVEL","value":"info"},{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
		"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"1","memory":"512Mi"}},
		"livenessProbe":{"httpGet":{"path":"/healthz","port":"http"},"initialDelaySeconds":10,"periodSeconds":10},
		"readinessProbe":{"httpGet":{"path":"/ready","port":"http"},"periodSeconds":5},
		"volumeMounts":[{"name":"config","mountPath":"C:\\config","readOnly":true},{"name":"cache","mountPath":"C:\\cache"}],
		"securityContext":{"runAsUser":1001,"runAsNonRoot":true,"readOnlyRootFilesystem":true,"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}}}`, i, 8080+i)
	}
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9f8b6c5d-x2x9q","generateName":"web-7d9f8b6c5d-","namespace":"demo",
	"labels":{"app.kubernetes.io/name":"web","app.kubernetes.io/instance":"web","pod-template-hash":"7d9f8b6c5d"},
	"annotations":{"checksum/config":"3f1c2b5e9a7d"},
	"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8b6c5d","uid":"5c0f7a52-8d1b-4c55-9d56-0c4b2f0b7e1a","controller":true,"blockOwnerDeletion":true}]},
	"spec":{"os":{"name":"windows"},"serviceAccountName":"web",
	"securityContext":{"runAsUser":1001,"fsGroup":1001,"seccompProfile":{"type":"RuntimeDefault"}},
	"volumes":[{"name":"config","configMap":{"name":"web"}},{"name":"cache","emptyDir":{"medium":"Memory","sizeLimit":"64Mi"}}],
	"containers":[%s]}}`, joinComma(containers))
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

var benchFacts = policy.Facts{Operation: policy.Create, Version: "bench",
	Namespace: policy.Namespace{Name: "demo", Labels: map[string]string{policy.LabelEnabled: "true"}}}

// BenchmarkMutate is decide + diff: raw object in, JSON patch out.
func BenchmarkMutate(b *testing.B) {
	pol := policy.Default()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, n := range []int{2, 20} {
		raw := benchPod(n)
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				res, err := Mutate(pol, gvk, raw, benchFacts)
				if err != nil || len(res.Patch) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFloor is the unavoidable part: decoding the same pod into its type and encoding it once.
func BenchmarkFloor(b *testing.B) {
	for _, n := range []int{2, 20} {
		raw := benchPod(n)
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				var pod corev1.Pod
				if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &pod); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(&pod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
