// Package e2e checks wincompat against the real kube-apiserver: the API server, not our
// reading of its validation code, decides whether a mutated object is acceptable.
package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// tally is one row of the report.
type tally struct {
	workloads, before, after, pods, runtimeClassPods int
}

func TestCorpusAdmittedAfterMutation(t *testing.T) {
	workloads := e2eutil.LoadCorpus(t)
	_, c := controlplane.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	setUpCluster(ctx, t, c, workloads)

	pol := policy.Default()
	facts := policy.Facts{
		Operation: policy.Create,
		Namespace: policy.Namespace{Name: e2eutil.Namespace, Labels: map[string]string{policy.LabelEnabled: "true"}},
		Version:   "e2e",
	}
	serverFacts := facts
	serverFacts.Cluster = &policy.Cluster{Builds: []string{"10.0.20348"}, RuntimeClasses: map[string]policy.RuntimeClass{}}
	for name, build := range e2eutil.WindowsBuilds {
		serverFacts.Cluster.RuntimeClasses[name] = policy.RuntimeClass{NodeSelector: map[string]string{
			corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: build,
		}}
	}

	var files []string
	byFile := map[string]*tally{}
	var total tally
	for _, w := range workloads {
		row := byFile[w.File]
		if row == nil {
			row = &tally{}
			byFile[w.File] = row
			files = append(files, w.File)
		}
		row.workloads++

		raw, err := w.Obj.MarshalJSON()
		if err != nil {
			t.Fatalf("%v: %v", w, err)
		}

		// Before: what a cluster without wincompat says. Only reported: rejecting Linux-only fields
		// is what the API server is expected to do.
		if err := e2eutil.DryRunCreate(ctx, c, raw); err != nil {
			t.Logf("before, rejected: %v: %v", w, err)
		} else {
			row.before++
		}

		mutated, err := e2eutil.Mutate(pol, raw, facts)
		if err != nil {
			t.Errorf("%v: mutating: %v", w, err)
			continue
		}
		if err := e2eutil.DryRunCreate(ctx, c, mutated); err != nil {
			t.Errorf("after wincompat, rejected: %v: %v", w, err)
			continue
		}
		row.after++

		// The pod a controller would create from the admitted template, which then meets the pod
		// webhook and the pod-only admission plugins (RuntimeClass, Priority, ServiceAccount). A corpus
		// Pod is its own pod, already admitted above.
		template := raw
		if w.Obj.GetKind() != "Pod" {
			if template, err = e2eutil.PodFromTemplate(w.Obj.GetKind(), mutated); err != nil {
				t.Errorf("%v: building its pod: %v", w, err)
				continue
			}
			pod, err := e2eutil.Mutate(pol, template, facts)
			if err != nil {
				t.Errorf("%v: mutating its pod: %v", w, err)
				continue
			}
			if err := e2eutil.DryRunCreate(ctx, c, pod); err != nil {
				t.Errorf("pod of %v, rejected after wincompat: %v", w, err)
				continue
			}
		}
		row.pods++
		// The same pod in server mode, where the cluster's only build decides and its RuntimeClass is
		// set: the RuntimeClass admission plugin merges the class's nodeSelector and tolerations with the
		// injected ones and rejects a conflicting key.
		pod, err := e2eutil.Mutate(pol, template, serverFacts)
		if err != nil {
			t.Errorf("%v: mutating its pod in server mode: %v", w, err)
			continue
		}
		if !strings.Contains(string(pod), `"runtimeClassName"`) && !strings.Contains(string(pod), `"hostProcess":true`) {
			t.Errorf("pod of %v: server mode set no RuntimeClass: %s", w, pod)
		}
		if err := e2eutil.DryRunCreate(ctx, c, pod); err != nil {
			t.Errorf("pod of %v with its RuntimeClass, rejected after wincompat: %v", w, err)
			continue
		}
		row.runtimeClassPods++
	}

	var report strings.Builder
	tw := tabwriter.NewWriter(&report, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "file\tworkloads\tadmitted before\tadmitted after\tpods admitted after\twith RuntimeClass\t")
	for _, f := range files {
		row := byFile[f]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", f, row.workloads, row.before, row.after, row.pods, row.runtimeClassPods)
		total.workloads += row.workloads
		total.before += row.before
		total.after += row.after
		total.pods += row.pods
		total.runtimeClassPods += row.runtimeClassPods
	}
	fmt.Fprintf(tw, "total (%d files)\t%d\t%d\t%d\t%d\t%d\t\n", len(files), total.workloads, total.before, total.after, total.pods, total.runtimeClassPods)
	tw.Flush()
	t.Logf("corpus against the real API server, every pod spec declared spec.os.name=windows:\n%s", report.String())

	if total.before == total.workloads {
		t.Errorf("all %d workloads were admitted before wincompat: the corpus exercises nothing wincompat fixes, or the API server is not validating Windows pods", total.workloads)
	}
}

func TestRejectsLinuxFieldOnWindowsPod(t *testing.T) {
	_, c := controlplane.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ns := "oracle"
	e2eutil.Create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	// The ServiceAccount plugin would otherwise reject the pod before validation gets to see it.
	e2eutil.Create(ctx, t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "linux-field", Namespace: ns},
		Spec: corev1.PodSpec{
			OS:              &corev1.PodOS{Name: corev1.Windows},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
			Containers:      []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}},
		},
	}
	err := c.Create(ctx, pod, client.DryRunAll)
	if err == nil {
		t.Fatal("a Windows pod with spec.securityContext.runAsUser was admitted: the API server is not the oracle these tests rely on")
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot be set for a windows pod") {
		t.Fatalf("rejected for another reason than the Windows field check: %v", err)
	}
}

// setUpCluster creates what the corpus expects of a cluster and no controller provides under envtest:
// the opted-in namespace demo and, through setUpClusterWide, the catalog's RuntimeClasses and the
// PriorityClasses the pods name.
func setUpCluster(ctx context.Context, t *testing.T, c client.Client, workloads []e2eutil.Workload) {
	t.Helper()
	e2eutil.SetUpNamespace(ctx, t, c, e2eutil.Namespace, map[string]string{policy.LabelEnabled: "true"}, workloads)
	e2eutil.SetUpClusterWide(ctx, t, c, workloads)
}
