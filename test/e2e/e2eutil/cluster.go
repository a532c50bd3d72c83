package e2eutil

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/server"
)

// Cluster is a control plane with wincompat's webhook configuration installed and served.
type Cluster struct {
	CP       *controlplane.ControlPlane // for KubeConfig of other users
	Cfg      *rest.Config
	C        client.Client
	Warnings *fixtures.Warnings
	Webhook  controlplane.Webhook
	stop     context.CancelFunc
	done     chan error
}

// ReadyNamespace is opted in by serve; tests that need no namespace of their own use it.
const ReadyNamespace = "wincompat-ready"

func StartCluster(t *testing.T) *Cluster {
	t.Helper()
	return StartClusterWith(t, nil)
}

// StartClusterWith is startCluster with more of the control plane (such as controlplane.WithScheduler)
// and tweaks to wincompat's server options.
func StartClusterWith(t *testing.T, planeOpts []controlplane.Option, tweaks ...func(*server.Options)) *Cluster {
	t.Helper()
	cl := NewCluster(t, planeOpts...)
	cl.Serve(t, tweaks...)
	return cl
}

// NewCluster starts the control plane without serving wincompat yet, for tests that must create
// objects before wincompat starts; call serve next.
func NewCluster(t *testing.T, planeOpts ...controlplane.Option) *Cluster {
	t.Helper()
	cp := controlplane.LaunchWithWebhooks(t, planeOpts...)
	cfg, wh := cp.Config, cp.Webhook
	w := &fixtures.Warnings{}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = w
	c, err := client.New(wcfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &Cluster{CP: cp, Cfg: cfg, C: c, Warnings: w, Webhook: wh}
}

// Serve runs wincompat serve in-process against the control plane, until stopServing or the test ends.
// tweaks change the options before the server starts.
func (cl *Cluster) Serve(t *testing.T, tweaks ...func(*server.Options)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cl.stop, cl.done = cancel, make(chan error, 1)
	// TLSMinVersion and EnableHTTP2 are `wincompat serve`'s flag defaults (cmd/wincompat/serve.go), which
	// TestWebhookServerHTTPS checks from the outside.
	opts := server.Options{
		CertDir: cl.Webhook.CertDir, Host: cl.Webhook.Host, Port: cl.Webhook.Port,
		MetricsAddr: "0", ProbeAddr: "0", TLSMinVersion: "1.3", ShutdownTimeout: 5 * time.Second,
		Policy: policy.Default(), Version: "e2e", Log: testr.New(t),
	}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	go func() { cl.done <- server.Run(ctx, cl.Cfg, opts) }()
	t.Cleanup(cl.StopServing)
	_ = cl.C.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ReadyNamespace, Labels: map[string]string{policy.LabelEnabled: "true"}}})
	_ = cl.C.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ReadyNamespace}})
	cl.WaitUntilMutating(t, ReadyNamespace)
}

func (cl *Cluster) StopServing() {
	if cl.stop == nil {
		return
	}
	cl.stop()
	<-cl.done
	cl.stop = nil
}

// NewNamespace creates a namespace with labels and its ServiceAccount "default" (no controller-manager
// runs to create it, and the ServiceAccount admission plugin rejects pods without it). An opted-in
// namespace is returned only once wincompat mutates pods in it.
func (cl *Cluster) NewNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	SetUpNamespace(context.Background(), t, cl.C, name, labels, nil)
	if labels[policy.LabelEnabled] == "true" {
		cl.WaitUntilMutating(t, name)
	}
}

// WaitUntilMutating waits until a dry-run Windows pod in ns comes back mutated by wincompat. The API
// server matches the namespace's labels at once, but wincompat reads them from its informer cache: a
// namespace it has not seen yet counts as not opted in, so the first pods would pass unmutated.
func (cl *Cluster) WaitUntilMutating(t *testing.T, ns string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// A server that failed to start shows up here as "connection refused"; say why instead.
		select {
		case err := <-cl.done:
			cl.stop()
			cl.stop = nil // nothing left for stopServing to wait for
			t.Fatalf("wincompat serve exited: %v", err)
		default:
		}
		pod := WindowsPod(ns, "probe")
		err := cl.C.Create(context.Background(), pod, client.DryRunAll)
		if err == nil && pod.Annotations[policy.AnnotationVersion] == "e2e" {
			cl.Warnings.Take() // the probe's warnings are not any test's
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("wincompat does not mutate Windows pods in namespace %s through the API server: %v", ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CreateAndGet creates obj for real and reads the stored object back into stored.
func (cl *Cluster) CreateAndGet(t *testing.T, obj, stored client.Object) error {
	t.Helper()
	ctx := context.Background()
	if err := cl.C.Create(ctx, obj); err != nil {
		return err
	}
	if err := cl.C.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
		t.Fatalf("reading back %s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// WincompatWarnings keeps the warnings wincompat wrote.
func WincompatWarnings(all []string) []string {
	var out []string
	for _, w := range all {
		if strings.HasPrefix(w, "wincompat: ") {
			out = append(out, w)
		}
	}
	return out
}

// WincompatAnnotations returns the wincompat.io/ annotations of meta.
func WincompatAnnotations(annotations map[string]string) []string {
	var out []string
	for k := range annotations {
		if strings.HasPrefix(k, "wincompat.io/") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// DecodeChanges parses a changes annotation and fails on duplicates: a second pass over the same
// object must never repeat an entry.
func DecodeChanges(t *testing.T, annotations map[string]string, key string) []policy.Change {
	t.Helper()
	s, ok := annotations[key]
	if !ok {
		t.Fatalf("no %s annotation; annotations: %v", key, annotations)
	}
	changes, err := policy.DecodeChanges(s)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	for i := range changes {
		for j := i + 1; j < len(changes); j++ {
			if SameChange(changes[i], changes[j]) {
				t.Errorf("%s lists %+v twice (entries %d and %d)", key, changes[i], i, j)
			}
		}
	}
	return changes
}

func SameChange(a, b policy.Change) bool {
	return a.Action == b.Action && a.Path == b.Path && a.Reason == b.Reason &&
		string(a.From) == string(b.From) && string(a.To) == string(b.To)
}

// HasChange reports whether changes holds an entry with this action and path.
func HasChange(changes []policy.Change, action policy.Action, path string) bool {
	return slices.ContainsFunc(changes, func(c policy.Change) bool { return c.Action == action && c.Path == path })
}

// WindowsToleration is the default policy's toleration for the Windows node taint.
var WindowsToleration = corev1.Toleration{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}

func CountToleration(pod *corev1.Pod, want corev1.Toleration) int {
	n := 0
	for _, tol := range pod.Spec.Tolerations {
		if tol.MatchToleration(&want) {
			n++
		}
	}
	return n
}

func WindowsPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			OS:              &corev1.PodOS{Name: corev1.Windows},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(1000))},
			Containers:      []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}},
		},
	}
}

// LinuxPod is a Linux pod with the Linux-only fields wincompat strips from Windows pods; os nil means
// no spec.os at all.
func LinuxPod(ns, name string, os *corev1.PodOS) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			OS: os,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:      ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
}
