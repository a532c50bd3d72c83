package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/server"
)

// warnings collects the warnings the API server returns, as kubectl would print them.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// cluster is a control plane with wincompat's webhook configuration installed and served.
type cluster struct {
	cfg      *rest.Config
	c        client.Client
	warnings *warnings
	webhook  controlplane.Webhook
	stop     context.CancelFunc
	done     chan error
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	cfg, _, wh := controlplane.StartWithWebhooks(t)
	w := &warnings{}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = w
	c, err := client.New(wcfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{cfg: cfg, c: c, warnings: w, webhook: wh}
	cl.serve(t)
	return cl
}

// serve runs wincompat serve in-process against the control plane, until stopServing or the test ends.
func (cl *cluster) serve(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cl.stop, cl.done = cancel, make(chan error, 1)
	opts := server.Options{
		CertDir: cl.webhook.CertDir, Host: cl.webhook.Host, Port: cl.webhook.Port,
		MetricsAddr: "0", ProbeAddr: "0", TLSMinVersion: "1.3", ShutdownTimeout: 5 * time.Second,
		Policy: policy.Default(), Version: "e2e", Log: testr.New(t),
	}
	go func() { cl.done <- server.Run(ctx, cl.cfg, opts) }()
	t.Cleanup(cl.stopServing)
	// Wait until the API server can reach the webhook: a dry-run Windows pod in a labelled namespace.
	deadline := time.Now().Add(30 * time.Second)
	ns := "wincompat-ready"
	_ = cl.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{policy.LabelEnabled: "true"}}})
	_ = cl.c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})
	for {
		pod := windowsPod(ns, "probe")
		err := cl.c.Create(context.Background(), pod, client.DryRunAll)
		if err == nil && pod.Annotations[policy.AnnotationVersion] == "e2e" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook not reachable through the API server: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (cl *cluster) stopServing() {
	if cl.stop == nil {
		return
	}
	cl.stop()
	<-cl.done
	cl.stop = nil
}

func windowsPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			OS:              &corev1.PodOS{Name: corev1.Windows},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(1000))},
			Containers:      []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}},
		},
	}
}

func TestWebhookSmoke(t *testing.T) {
	cl := startCluster(t)
	ctx := context.Background()
	pod := windowsPod("wincompat-ready", "smoke")
	if err := cl.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.SecurityContext.RunAsUser != nil || pod.Spec.RuntimeClassName != nil && *pod.Spec.RuntimeClassName == "" {
		t.Errorf("stored pod: %+v", pod.Spec)
	}
	t.Logf("annotations: %v\nwarnings: %v", pod.Annotations, cl.warnings.take())
}
