package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// testName is a Go test's name, as it would appear in a string the demo prints.
var testName = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)

// What the demo prints is for its user, who runs no Go test: no string literal of the demo's own code
// names one (the comments may).
func TestOutputNamesNoTest(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				s = lit.Value
			}
			if name := testName.FindString(s); name != "" {
				t.Errorf("%s: the demo prints the test name %s: %.80q", fset.Position(lit.Pos()), name, s)
			}
			return true
		})
	}
}

// A Deployment's pods are its ReplicaSet's, and the ReplicaSet the Deployment's, as their controllers
// make them: whatever reads the cluster afterwards (wincompat audit) finds each pod through its
// controller instead of taking it for a workload of its own.
func TestPodsAreOwnedAsControllersOwnThem(t *testing.T) {
	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": demoNamespace, "uid": "dep-uid"},
		"spec": map[string]any{
			"replicas": int64(2),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "iis"}}},
			},
		},
	}}
	rs, err := replicaSetOf(dep)
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil || ref.Kind != "Deployment" || ref.Name != "web" || ref.UID != "dep-uid" || ref.APIVersion != "apps/v1" {
		t.Fatalf("ReplicaSet %s: controller %+v, want Deployment web", rs.GetName(), ref)
	}
	hash := rs.GetLabels()["pod-template-hash"]
	if hash == "" || rs.GetName() != "web-"+hash {
		t.Errorf("ReplicaSet %s, labels %v: want web-<pod-template-hash>", rs.GetName(), rs.GetLabels())
	}
	selector, _, _ := unstructured.NestedStringMap(rs.Object, "spec", "selector", "matchLabels")
	rs.SetUID("rs-uid")
	pod, err := podFromTemplate(rs)
	if err != nil {
		t.Fatal(err)
	}
	ref = metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" || ref.Name != rs.GetName() || ref.UID != "rs-uid" {
		t.Fatalf("pod %s: controller %+v, want ReplicaSet %s", pod.GetGenerateName(), ref, rs.GetName())
	}
	if !labels.SelectorFromSet(selector).Matches(labels.Set(pod.GetLabels())) || selector["pod-template-hash"] != hash {
		t.Errorf("pod labels %v not selected by the ReplicaSet's %v", pod.GetLabels(), selector)
	}
	if pod.GetGenerateName() != rs.GetName()+"-" {
		t.Errorf("pod generateName %q, want %q", pod.GetGenerateName(), rs.GetName()+"-")
	}
}
