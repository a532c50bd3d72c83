package releases

// Issue 30: what a version serves decides what wincompat does on it. Tests that need an API a supported
// version does not serve say so and stop (requireAdmissionPolicies); the behaviour on those versions is
// tested here, against an API server that really does not serve it.

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestHybridWhereAdmissionPoliciesAreNotServed: `serve --engine=hybrid` against an API server without
// MutatingAdmissionPolicy v1 (1.34 and 1.35 as released; on later versions the resources are switched
// off with --runtime-config) says so once at start-up, installs nothing, and the webhook alone still
// rewrites Windows pods completely.
func TestHybridWhereAdmissionPoliciesAreNotServed(t *testing.T) {
	var opts []controlplane.Option
	v := e2eutil.ReleaseUnderTest(t)
	if semverCompare(v, "v1.36.0") >= 0 {
		// The admission plugin goes too: it waits for the resources it reads, and the API server with it.
		opts = append(opts, controlplane.WithAPIServerFlag("runtime-config",
			"admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false"),
			controlplane.WithAPIServerFlag("disable-admission-plugins", "MutatingAdmissionPolicy"))
	}
	cl := e2eutil.NewCluster(t, opts...)
	if e2eutil.AdmissionPoliciesServed(t, cl.Cfg) {
		t.Fatalf("kube-apiserver %s serves MutatingAdmissionPolicy v1 although asked not to", v)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	capture := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{})
	cl.Serve(t, func(o *server.Options) {
		o.Engine = server.EngineHybrid
		o.Log = logr.New(teeSink{o.Log.GetSink(), capture.GetSink()})
	})
	const ns = "hybrid-unserved"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
	pod := e2eutil.WindowsChartPod(ns, "chart", "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "app")
	if err := cl.C.Create(context.Background(), pod); err != nil {
		t.Fatalf("a Windows chart pod is refused: %v", err)
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsUser != nil || pod.Annotations[policy.AnnotationBuild] == "" || pod.Annotations[policy.AnnotationVersion] == "" {
		t.Errorf("the webhook alone did not rewrite the pod: %v", pod.Annotations)
	}
	mu.Lock()
	said := logs.String()
	mu.Unlock()
	if n := strings.Count(said, "does not serve MutatingAdmissionPolicy v1"); n != 1 {
		t.Errorf("serve said %d times that the API server does not serve admission policies, want once at start-up:\n%s", n, said)
	}
	_, err := cl.C.RESTMapper().RESTMapping(schema.GroupKind{Group: admissionregistrationv1.GroupName, Kind: "MutatingAdmissionPolicy"}, "v1")
	if !apimeta.IsNoMatchError(err) {
		t.Errorf("MutatingAdmissionPolicy v1 mapping: %v, want no match", err)
	}
}

// teeSink logs to two sinks: the test's log and a capture.
type teeSink struct{ a, b logr.LogSink }

func (s teeSink) Init(info logr.RuntimeInfo) { s.a.Init(info); s.b.Init(info) }

func (s teeSink) Enabled(level int) bool { return s.a.Enabled(level) || s.b.Enabled(level) }

func (s teeSink) Info(level int, msg string, kv ...any) {
	s.a.Info(level, msg, kv...)
	s.b.Info(level, msg, kv...)
}

func (s teeSink) Error(err error, msg string, kv ...any) {
	s.a.Error(err, msg, kv...)
	s.b.Error(err, msg, kv...)
}

func (s teeSink) WithValues(kv ...any) logr.LogSink {
	return teeSink{s.a.WithValues(kv...), s.b.WithValues(kv...)}
}

func (s teeSink) WithName(name string) logr.LogSink {
	return teeSink{s.a.WithName(name), s.b.WithName(name)}
}

// TestHelmChartOnThisServer: the chart rendered by helm against this API server (its own discovery, as
// `helm install` sees it) picks the engine from what the server serves, hybrid exactly where it serves
// MutatingAdmissionPolicy v1, and every object it renders is accepted there (server-side apply).
func TestHelmChartOnThisServer(t *testing.T) {
	cp := controlplane.LaunchBare(t)
	ctx := context.Background()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeConfig(kubeconfig, "helm", "system:masters"); err != nil {
		t.Fatal(err)
	}
	certManager := filepath.Join(e2eutil.ModuleDir(t, e2eutil.CertManagerModule), "deploy", "crds")
	crds, _ := filepath.Glob(filepath.Join(certManager, "cert-manager.io_*.yaml"))
	e2eutil.InstallCRDs(ctx, t, cp.Client, crds)
	e2eutil.SetUpNamespace(ctx, t, cp.Client, e2eutil.OwnNamespace, nil, nil)

	// --validate makes helm read the server's API versions instead of its built-in list.
	out := e2eutil.Helm(t, "template", "wincompat", "deploy/helm/wincompat", "--namespace", e2eutil.OwnNamespace, "--validate", "--kubeconfig", kubeconfig)
	var engine string
	applied := 0
	for _, obj := range e2eutil.Manifests(t, out) {
		if obj.GetKind() == "Deployment" {
			for _, a := range e2eutil.DeploymentOf(t, obj).Spec.Template.Spec.Containers[0].Args {
				if v, ok := strings.CutPrefix(a, "--engine="); ok {
					engine = v
				}
			}
		}
		if err := cp.Client.Patch(ctx, obj, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
			t.Errorf("%s %s refused by the API server: %v", obj.GetKind(), obj.GetName(), err)
		}
		applied++
	}
	v := e2eutil.ReleaseUnderTest(t)
	want := "webhook"
	if e2eutil.AdmissionPoliciesServed(t, cp.Config) {
		want = "hybrid"
	}
	if engine != want {
		t.Errorf("kube-apiserver %s: engine: auto rendered --engine=%q, want %q", v, engine, want)
	}
	t.Logf("kube-apiserver %s: engine auto is %s; %d objects applied", v, engine, applied)
}
