package chart

// Issue 17: wincompat as a KRM function, run by the real kustomize (built from the version pinned in
// test/go.mod into bin/kustomize, as helm is) on the shipped example (deploy/examples/kustomize) plus a
// chart of the shared corpus declared Windows by its namespace. What kustomize builds must equal what
// `wincompat mutate` writes for the same input, object for object.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/test/controlplane"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

func TestKustomizeRunsTheFunction(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kustomize := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		t.Fatalf("%s missing: run `make bin/kustomize` in %s (it builds kustomize from the version pinned in test/go.mod)", kustomize, root)
	}
	bin := e2eutil.BuildWincompat(t)
	example := filepath.Join(root, "deploy", "examples", "kustomize")
	dir := t.TempDir()
	e2eutil.CopyFile(t, filepath.Join(example, "web.yaml"), filepath.Join(dir, "web.yaml"))
	charts := filepath.Join(root, "..", "shared", "corpus", "charts")
	e2eutil.CopyFile(t, filepath.Join(charts, "bitnami-postgresql.yaml"), filepath.Join(dir, "chart.yaml"))
	e2eutil.CopyFile(t, filepath.Join(charts, "grafana.yaml"), filepath.Join(dir, "chart2.yaml"))
	kustomization, err := os.ReadFile(filepath.Join(example, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization = bytes.Replace(kustomization, []byte("  - web.yaml\n"), []byte("  - web.yaml\n  - chart.yaml\n  - chart2.yaml\n"), 1)
	write(t, filepath.Join(dir, "kustomization.yaml"), kustomization)
	// The example's function config, with this build's binary instead of the one on PATH, and the
	// namespace labelled to treat pods without spec.os as Windows (the chart declares none).
	const labels = "wincompat.io/enabled=true,wincompat.io/default-os=windows"
	config, err := os.ReadFile(filepath.Join(example, "wincompat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	config = bytes.Replace(config, []byte("path: wincompat\n"), []byte("path: "+bin+"\n"), 1)
	config = bytes.Replace(config, []byte("namespace-labels: wincompat.io/enabled=true\n"), []byte("namespace-labels: "+labels+"\n"), 1)
	if !bytes.Contains(config, []byte(bin)) || !bytes.Contains(config, []byte(labels)) {
		t.Fatalf("the example's wincompat.yaml changed shape; update this test:\n%s", config)
	}
	write(t, filepath.Join(dir, "wincompat.yaml"), config)

	built := run(t, kustomize, "build", "--enable-alpha-plugins", "--enable-exec", dir)
	mutated := run(t, bin, "mutate", "-f", filepath.Join(dir, "web.yaml"), "-f", filepath.Join(dir, "chart.yaml"), "-f", filepath.Join(dir, "chart2.yaml"), "--namespace-labels", labels, "--quiet")
	got, want := objectsByID(t, built), objectsByID(t, mutated)
	if len(want) < 4 {
		t.Fatalf("only %d objects in the input; the case proves little", len(want))
	}
	changed := 0
	for id, w := range want {
		if g, ok := got[id]; !ok {
			t.Errorf("kustomize's output lacks %s", id)
		} else if g != w {
			t.Errorf("%s differs:\nkustomize %s\nmutate    %s", id, g, w)
		}
		if strings.Contains(w, "wincompat.io/template-changes") {
			changed++
		}
	}
	if len(got) != len(want) || changed != len(want)-1 {
		t.Errorf("kustomize gave %d objects, mutate %d, of which %d changed (want every workload, and the Service as it was)", len(got), len(want), changed)
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, errOut.String())
	}
	return out
}

// objectsByID parses a YAML stream into each object's canonical JSON, by kind, namespace and name.
func objectsByID(t *testing.T, stream []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, doc := range strings.Split(string(stream), "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		id := obj["kind"].(string) + " " + str(meta["namespace"]) + "/" + str(meta["name"])
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = string(b)
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }
