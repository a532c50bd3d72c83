package perf

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/test/fixtures"
)

// ChartPod is the pod of the Go benchmarks (webhook/bench_test.go benchPod(n)) in namespace ns, so that
// the served figures and the benchmarks measure the same object: n containers with the Linux security
// defaults of real charts, resources, probes, env and mounts. With windows false it is the same pod for
// Linux: no spec.os and a Linux image.
func ChartPod(n int, ns string, windows bool) []byte {
	image := "registry.example/web:1.4.2"
	if windows {
		image = "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"
	}
	images := make([]string, n)
	for i := range images {
		images[i] = image
	}
	return chartPod(ns, windows, images)
}

// WindowsChartPod is ChartPod(len(images), ns, true) with container i running images[i].
func WindowsChartPod(ns string, images ...string) []byte { return chartPod(ns, true, images) }

func chartPod(ns string, windows bool, images []string) []byte {
	os, config, cache := "", "/config", "/cache"
	if windows {
		os = `"os":{"name":"windows"},`
		config, cache = `C:\\config`, `C:\\cache` // JSON-escaped
	}
	containers := make([]string, len(images))
	for i, image := range images {
		containers[i] = fmt.Sprintf(`{"name":"c%d","image":%q,
		"ports":[{"name":"http","containerPort":%d,"protocol":"TCP"}],
		"env":[{"name":"LOG_LEVEL","value":"info"},{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
		"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"1","memory":"512Mi"}},
		"livenessProbe":{"httpGet":{"path":"/healthz","port":"http"},"initialDelaySeconds":10,"periodSeconds":10},
		"readinessProbe":{"httpGet":{"path":"/ready","port":"http"},"periodSeconds":5},
		"volumeMounts":[{"name":"config","mountPath":"%s","readOnly":true},{"name":"cache","mountPath":"%s"}],
		"securityContext":{"runAsUser":1001,"runAsNonRoot":true,"readOnlyRootFilesystem":true,"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}}}`, i, image, 8080+i, config, cache)
	}
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9f8b6c5d-x2x9q","generateName":"web-7d9f8b6c5d-","namespace":%q,
	"labels":{"app.kubernetes.io/name":"web","app.kubernetes.io/instance":"web","pod-template-hash":"7d9f8b6c5d"},
	"annotations":{"checksum/config":"3f1c2b5e9a7d"},
	"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8b6c5d","uid":"5c0f7a52-8d1b-4c55-9d56-0c4b2f0b7e1a","controller":true,"blockOwnerDeletion":true}]},
	"spec":{%s"serviceAccountName":"web",
	"securityContext":{"runAsUser":1001,"fsGroup":1001,"seccompProfile":{"type":"RuntimeDefault"}},
	"volumes":[{"name":"config","configMap":{"name":"web"}},{"name":"cache","emptyDir":{"medium":"Memory","sizeLimit":"64Mi"}}],
	"containers":[%s]}}`, ns, os, strings.Join(containers, ","))
}

// CorpusPod is the pod that Deployment name of a corpus chart rendering would create, declared Windows
// as an operator deploying the chart to Windows nodes would, in namespace ns: the real pod of the Go
// benchmarks (webhook/bench_test.go corpusPod) is the ingress-nginx controller.
func CorpusPod(path, name, ns string) ([]byte, error) {
	docs, err := fixtures.ReadDocuments(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	i := slices.IndexFunc(docs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" && o.GetName() == name })
	if i < 0 {
		return nil, fmt.Errorf("%s: no Deployment %s", path, name)
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(docs[i].Object, &d); err != nil {
		return nil, fmt.Errorf("%s: Deployment %s: %w", path, name, err)
	}
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: d.Spec.Template.ObjectMeta,
		Spec:       d.Spec.Template.Spec,
	}
	pod.Name, pod.GenerateName, pod.Namespace = name+"-7d9f8b6c5d-q4x7z", name+"-7d9f8b6c5d-", ns
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	return json.Marshal(&pod)
}

// ApplyPatch applies an RFC 6902 patch, as the API server applies a webhook's.
func ApplyPatch(doc, patch []byte) ([]byte, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	return p.Apply(doc)
}

// TypedPod decodes a pod for client-go, refusing fields its types do not know: a pod that lost fields
// on the way would not be the pod that was measured.
func TypedPod(raw []byte) (*corev1.Pod, error) {
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(raw, &pod); err != nil {
		return nil, err
	}
	if pod.Name == "" {
		return nil, errors.New("pod without a name")
	}
	return &pod, nil
}
