package audit

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/pagedfake"
)

// Issue 41: namespaces are listed page by page and the objects view's rows can be kept on disk, so
// that the audit's memory stays flat where Windows is large too.

// TestNamespacesPaged: namespaces are listed page by page like everything else, and a page at a time
// gives the report that one list does.
func TestNamespacesPaged(t *testing.T) {
	objs := []client.Object{node("win-0", b2022, true)}
	for i := range 5 {
		ns := namespace(fmt.Sprintf("ns-%d", i), map[string]string{policy.LabelEnabled: strconv.FormatBool(i%2 == 0)})
		ns.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)}
		p := winPod("app", img2022)
		p.Namespace = ns.Name
		objs = append(objs, ns, p)
	}
	c, pages := pagedfake.New(objs...)
	paged, err := Run(context.Background(), c, Options{PageSize: 2, Objects: true})
	if err != nil {
		t.Fatal(err)
	}
	if pages["*v1.NamespaceList"] != 3 {
		t.Errorf("5 namespaces in %d pages, want 3 of at most 2", pages["*v1.NamespaceList"])
	}
	whole := run(t, Options{Objects: true}, objs...)
	var a, b bytes.Buffer
	if err := paged.WriteJSON(&a); err != nil {
		t.Fatal(err)
	}
	if err := whole.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("paged:\n%s\nin one list:\n%s", a.String(), b.String())
	}
	if !strings.Contains(a.String(), NamespaceUnlabeled) {
		t.Errorf("no %s finding: the namespaces' labels were lost\n%s", NamespaceUnlabeled, a.String())
	}
}

// TestNamespaceKeepsWhatThePolicyReads: of a namespace's annotations, wincompat's own are kept (a build
// asked for), the rest dropped.
func TestNamespaceKeepsWhatThePolicyReads(t *testing.T) {
	n := newNamespaces()
	n.keep(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{policy.LabelEnabled: "true"},
		Annotations: map[string]string{policy.AnnotationBuild: "ltsc2022", "kubectl.kubernetes.io/last-applied-configuration": "{}"}}})
	got := n.facts("web")
	if got.Labels[policy.LabelEnabled] != "true" || len(got.Annotations) != 1 || got.Annotations[policy.AnnotationBuild] != "ltsc2022" {
		t.Errorf("kept %+v", got)
	}
}

// evilRow is a row with strings a pod's author chose: control and format characters, bytes that are not
// UTF-8, and JSON's own escapes.
func evilRow(ns, name string, i int) ObjectRow {
	return ObjectRow{Namespace: ns, Kind: "Pod", Name: name, Covered: i%2 == 0, Changes: i % 7,
		Build: "10.0.20348\xff", BuildSource: "\x1b[2J\u009b\u202e\"<&>", Node: fmt.Sprintf("node-%d\u2028", i), NodeBuild: "\x7f\\"}
}

// TestObjectsOnDiskWriteAlike: rows kept on disk and merged come out byte for byte as the rows kept in
// memory do, in JSON, the table and CSV, across several runs, with equal keys in the order added.
func TestObjectsOnDiskWriteAlike(t *testing.T) {
	for _, rows := range []int{0, 1, spoolRunRows, 3*spoolRunRows + 17} {
		t.Run(strconv.Itoa(rows), func(t *testing.T) {
			rnd := rand.New(rand.NewSource(int64(rows)))
			spool, err := newObjectSpool()
			if err != nil {
				t.Fatal(err)
			}
			mem, disk := &objectRows{keep: true}, &objectRows{keep: true, onDisk: spool}
			for i := range rows {
				// Few names, so that keys repeat across runs and only the order added tells them apart.
				row := evilRow(fmt.Sprintf("ns-%d", rnd.Intn(9)), fmt.Sprintf("p-%d", rnd.Intn(rows/3+1)), i)
				if i%5 == 0 {
					row.Kind, row.Node = "Deployment", ""
				}
				mem.add(row)
				disk.add(row)
			}
			base := Report{
				Namespaces: []NamespaceRow{{Namespace: "ns-1", WindowsPods: rows}},
				Findings:   []Finding{{Kind: NotCovered, Namespace: "ns-1", Object: "Pod/p-1", Detail: "\u009b"}},
				Notes:      []string{"a note"}, Truncated: map[string]int{NotCovered: 3},
			}
			inMemory, onDisk := base, base
			inMemory.Objects = mem.sorted()
			onDisk.Objects, onDisk.onDisk = disk.sorted(), disk.onDisk
			if len(onDisk.Objects) != 0 {
				t.Fatalf("%d rows in memory as well as on disk", len(onDisk.Objects))
			}
			for _, write := range []struct {
				name string
				f    func(*Report, *bytes.Buffer) error
			}{
				{"JSON", func(r *Report, b *bytes.Buffer) error { return r.WriteJSON(b) }},
				{"table", func(r *Report, b *bytes.Buffer) error { return r.WriteTable(b, ViewObjects) }},
				{"CSV", func(r *Report, b *bytes.Buffer) error { return r.WriteCSV(b, ViewObjects) }},
			} {
				var want, got bytes.Buffer
				if err := write.f(&inMemory, &want); err != nil {
					t.Fatal(err)
				}
				if err := write.f(&onDisk, &got); err != nil {
					t.Fatal(err)
				}
				if got.String() != want.String() {
					t.Errorf("%s from disk differs:\n%s\nfrom memory:\n%s", write.name, head(got.String()), head(want.String()))
				}
			}
			file := spool.file.Name()
			if err := onDisk.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("%s is left after Close: %v", file, err)
			}
		})
	}
}

func head(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// TestObjectsOnDiskRun: an audit with ObjectsOnDisk writes the report the in-memory one does.
func TestObjectsOnDiskRun(t *testing.T) {
	objs := append(mixedObjects(), winPod("win-a", img2022), onNode(winPod("win-b", img2022), "win-0"), deployment("win-d", winPod("x", img2022).Spec))
	inMemory := run(t, Options{Objects: true}, objs...)
	onDisk := run(t, Options{Objects: true, ObjectsOnDisk: true}, objs...)
	defer onDisk.Close()
	if onDisk.onDisk == nil || len(onDisk.Objects) != 0 {
		t.Fatalf("the rows are not on disk: %d in memory", len(onDisk.Objects))
	}
	var want, got bytes.Buffer
	if err := inMemory.WriteJSON(&want); err != nil {
		t.Fatal(err)
	}
	if err := onDisk.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() || !strings.Contains(want.String(), `"name": "win-d"`) {
		t.Errorf("from disk:\n%s\nfrom memory:\n%s", got.String(), want.String())
	}
}
