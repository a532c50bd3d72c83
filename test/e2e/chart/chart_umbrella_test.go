package chart

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/test/controlplane"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// The umbrella chart's release and what it makes of wincompat's image with its globals.
const (
	umbrellaRelease = "platform"
	umbrellaImage   = "registry.internal:5000/wincompat/wincompat:0.1.0"
)

// umbrellaChart is testdata/umbrella, a platform team's chart, with wincompat in its charts/ directory
// as `helm dependency build` leaves it, in a directory of the test's own.
func umbrellaChart(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), umbrellaRelease)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "umbrella"))); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "charts", "wincompat"), os.DirFS(filepath.Join(root, e2eutil.ChartDir))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHelmChartAsSubchart: issue 43. Helm gives every chart of an umbrella chart its global values, and
// the chart's schema refused them ("additional properties 'global' not allowed"), so wincompat could not
// be a dependency. An umbrella chart with wincompat in charts/ renders; wincompat takes the umbrella's
// global.imageRegistry and global.imagePullSecrets as Bitnami-style charts do, ignores other charts'
// globals, and follows the umbrella's condition wincompat.enabled; its own checks still hold inside the
// umbrella. Rendering only: TestHelmChartPrerequisites installs the umbrella on the real API server.
func TestHelmChartAsSubchart(t *testing.T) {
	dir := umbrellaChart(t)
	template := func(extra ...string) ([]byte, string, error) {
		args := append([]string{"template", umbrellaRelease, dir, "--namespace", umbrellaRelease, "--kube-version", e2eutil.ReleaseUnderTest(t)}, extra...)
		return e2eutil.RunHelm(t, args...)
	}
	out, stderr, err := template()
	if err != nil {
		t.Fatalf("helm template of the umbrella chart: %v\n%s", err, stderr)
	}
	objs := e2eutil.Manifests(t, out)
	checkUmbrellaDeployment(t, deploymentOf(t, objs), umbrellaImage, []string{"platform-pull"})
	var own bool
	for _, obj := range objs {
		own = own || obj.GetKind() == "ConfigMap" && obj.GetName() == umbrellaRelease+"-platform"
	}
	if !own {
		t.Error("the umbrella's own ConfigMap was not rendered")
	}

	t.Run("turned off by the umbrella", func(t *testing.T) {
		out, stderr, err := template("--set", "wincompat.enabled=false")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		for _, obj := range e2eutil.Manifests(t, out) {
			if strings.Contains(obj.GetName(), "wincompat") {
				t.Errorf("%s %s rendered with wincompat.enabled=false", obj.GetKind(), obj.GetName())
			}
		}
	})

	t.Run("its checks hold inside the umbrella", func(t *testing.T) {
		for _, tc := range []struct{ set, want string }{
			{"wincompat.replicaCnt=3", "unknown key replicaCnt: did you mean replicaCount?"},
			{"wincompat.policy.defaultBuild=ltsc2021", "at '/policy/defaultBuild'"},
			{"wincompat.replicaCount=0", "replicaCount 0 leaves no replica"},
			{"global.imageRegistry=not a host", "at '/global/imageRegistry'"},
		} {
			_, stderr, err := template("--set", tc.set)
			checkHelmRefused(t, "helm template --set "+tc.set, err, stderr, []string{tc.want})
		}
	})

	t.Run("globals of the chart alone", func(t *testing.T) {
		// As the issue typed it: refused before, with "additional properties 'global' not allowed".
		out := e2eutil.Helm(t, append(e2eutil.TemplateArgs(t, ""), "--set", "global.imageRegistry=foo")...)
		checkUmbrellaDeployment(t, deploymentOf(t, e2eutil.Manifests(t, out)), "foo/wincompat/wincompat:0.1.0", nil)
		// A repository without a registry host gets the registry in front; the chart's own pull
		// secrets come first, each name once.
		out = e2eutil.Helm(t, e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t,
			"image: {repository: team/wincompat, pullSecrets: [own, shared]}\nglobal: {imageRegistry: mirror.example/proxy, imagePullSecrets: [shared, {name: global}]}\n"))...)
		checkUmbrellaDeployment(t, deploymentOf(t, e2eutil.Manifests(t, out)), "mirror.example/proxy/team/wincompat:0.1.0", []string{"own", "shared", "global"})
	})
}

// deploymentOf is the one Deployment among objs.
func deploymentOf(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
			t.Fatal(err)
		}
		return &d
	}
	t.Fatal("no Deployment rendered")
	return nil
}

// checkUmbrellaDeployment: wincompat's pods run image, pulled with the Secrets named in secrets.
func checkUmbrellaDeployment(t *testing.T, d *appsv1.Deployment, image string, secrets []string) {
	t.Helper()
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("image %q, want %q", got, image)
	}
	var names []string
	for _, s := range d.Spec.Template.Spec.ImagePullSecrets {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, secrets) {
		t.Errorf("imagePullSecrets %q, want %q", names, secrets)
	}
}

// installUmbrella installs the umbrella chart with wincompat in it on the control plane, as its
// administrator (kubeconfig admin), and checks what wincompat's part made there.
func installUmbrella(ctx context.Context, t *testing.T, c client.Client, admin string) {
	t.Helper()
	out, stderr, err := e2eutil.RunHelm(t, "install", umbrellaRelease, umbrellaChart(t), "--namespace", umbrellaRelease, "--create-namespace", "--kubeconfig", admin)
	if err != nil {
		t.Fatalf("helm install of the umbrella chart: %v\n%s%s", err, out, stderr)
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: umbrellaRelease, Name: umbrellaRelease + "-wincompat"}, &d); err != nil {
		t.Fatalf("wincompat's Deployment of the umbrella release: %v", err)
	}
	checkUmbrellaDeployment(t, &d, umbrellaImage, []string{"platform-pull"})
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: umbrellaRelease, Name: umbrellaRelease + "-wincompat-policy"}, &cm); err != nil {
		t.Errorf("wincompat's policy of the umbrella release: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: umbrellaRelease, Name: umbrellaRelease + "-platform"}, &cm); err != nil {
		t.Errorf("the umbrella's own ConfigMap: %v", err)
	}
}
