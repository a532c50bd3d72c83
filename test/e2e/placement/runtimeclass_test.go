package placement

// Issue 4: the RuntimeClasses `wincompat serve` keeps for the build catalog, through the
// real API server: created, repaired, recreated, never touched when someone else owns the name, and
// accepted by the API server's RuntimeClass admission plugin on the pods wincompat gives them to.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/wincompat/wincompat/policy"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// wantCatalogClass is the class the default policy asks for, written out here rather than taken from
// wincompat's code: the handler, the two node labels and the Windows taint's toleration.
func wantCatalogClass(name, build string) nodev1.RuntimeClass {
	return nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{e2eutil.ManagedByLabel: "wincompat"}},
		Handler:    "runhcs-wcow-process",
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: build},
			Tolerations:  []corev1.Toleration{e2eutil.WindowsToleration},
		},
	}
}

// checkCatalogClass compares a stored class with wantCatalogClass; other labels may be added.
func checkCatalogClass(t *testing.T, got nodev1.RuntimeClass, want nodev1.RuntimeClass) {
	t.Helper()
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			t.Errorf("RuntimeClass %s: label %s=%q, want %q (labels %v)", got.Name, k, got.Labels[k], v, got.Labels)
		}
	}
	if got.Handler != want.Handler {
		t.Errorf("RuntimeClass %s: handler %q, want %q", got.Name, got.Handler, want.Handler)
	}
	if !equality.Semantic.DeepEqual(got.Scheduling, want.Scheduling) {
		t.Errorf("RuntimeClass %s: scheduling %+v, want %+v", got.Name, got.Scheduling, want.Scheduling)
	}
	if got.Overhead != nil {
		t.Errorf("RuntimeClass %s: overhead %+v, want none", got.Name, got.Overhead)
	}
}

// conflictGauge reads wincompat_runtimeclass_conflicts from controller-runtime's registry, which the
// in-process server registers it in (-1 when it is not registered).
func conflictGauge(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() == "wincompat_runtimeclass_conflicts" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// checkMergedByPlugin checks that a stored pod carries its RuntimeClass's scheduling, as the
// RuntimeClass admission plugin merges it.
func checkMergedByPlugin(t *testing.T, pod *corev1.Pod, rc nodev1.RuntimeClass) {
	t.Helper()
	for k, v := range rc.Scheduling.NodeSelector {
		if pod.Spec.NodeSelector[k] != v {
			t.Errorf("pod %s: nodeSelector %v lacks %s=%s of RuntimeClass %s", pod.Name, pod.Spec.NodeSelector, k, v, rc.Name)
		}
	}
	for _, tol := range rc.Scheduling.Tolerations {
		if e2eutil.CountToleration(pod, tol) == 0 {
			t.Errorf("pod %s: tolerations %+v lack %+v of RuntimeClass %s", pod.Name, pod.Spec.Tolerations, tol, rc.Name)
		}
	}
}

// TestRuntimeClassLifecycle: the catalog's classes appear, are repaired when edited and recreated when
// deleted, and a pod wincompat gives one is admitted with the class's scheduling merged.
func TestRuntimeClassLifecycle(t *testing.T) {
	cl := e2eutil.StartClusterWith(t, nil, e2eutil.ManageRuntimeClasses)
	ctx := context.Background()
	// No Node and no RuntimeClass exist: the reconciler's start-up pass alone must create the catalog.
	cl.WaitForManagedRuntimeClasses(t, 3)
	for name, build := range e2eutil.WindowsBuilds {
		rc, ok := cl.GetClass(t, name)
		if !ok {
			t.Fatalf("RuntimeClass %s missing", name)
		}
		checkCatalogClass(t, rc, wantCatalogClass(name, build))
	}
	// The gauge is process-wide and set at the end of each reconcile, a moment after the creates.
	e2eutil.Eventually(t, "wincompat_runtimeclass_conflicts is not 0 with no unmanaged class", func() bool { return conflictGauge(t) == 0 })

	t.Run("repaired when edited", func(t *testing.T) {
		rc, _ := cl.GetClass(t, "windows-2022")
		edited := rc.DeepCopy()
		// Someone points the class at the 2019 nodes: its pods would land on the wrong build.
		edited.Scheduling.NodeSelector[corev1.LabelWindowsBuild] = e2eutil.Build2019
		if err := cl.C.Update(ctx, edited); err != nil {
			t.Fatalf("editing windows-2022: %v", err)
		}
		after := e2eutil.Eventually(t, "windows-2022 was not repaired", func() bool {
			got, ok := cl.GetClass(t, "windows-2022")
			return ok && got.Scheduling != nil && got.Scheduling.NodeSelector[corev1.LabelWindowsBuild] == e2eutil.Build2022
		})
		got, _ := cl.GetClass(t, "windows-2022")
		checkCatalogClass(t, got, wantCatalogClass("windows-2022", e2eutil.Build2022))
		if got.UID != rc.UID {
			t.Errorf("windows-2022 was replaced (uid %s → %s), want it updated in place", rc.UID, got.UID)
		}
		t.Logf("edited nodeSelector of windows-2022 restored after %v", after.Round(time.Millisecond))
	})

	t.Run("recreated when deleted", func(t *testing.T) {
		rc, _ := cl.GetClass(t, "windows-2019")
		if err := cl.C.Delete(ctx, &rc); err != nil {
			t.Fatalf("deleting windows-2019: %v", err)
		}
		after := e2eutil.Eventually(t, "windows-2019 was not recreated", func() bool {
			got, ok := cl.GetClass(t, "windows-2019")
			return ok && got.UID != rc.UID
		})
		got, _ := cl.GetClass(t, "windows-2019")
		checkCatalogClass(t, got, wantCatalogClass("windows-2019", e2eutil.Build2019))
		t.Logf("deleted windows-2019 recreated after %v", after.Round(time.Millisecond))
	})

	t.Run("pods pass the RuntimeClass admission plugin", func(t *testing.T) {
		const ns = "runtimeclass-pods"
		cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
		rc, _ := cl.GetClass(t, "windows-2022")
		// wincompat's cache must hold the class (recreated/repaired above) before it names it.
		cl.WaitForAdmission(t, ns, e2eutil.ProbePod(e2eutil.Images2022[0]), "windows-2022", func(p *corev1.Pod, _ []string) bool {
			return ptr.Deref(p.Spec.RuntimeClassName, "") == "windows-2022"
		})

		// wincompat chooses the class from the image.
		var fromImage corev1.Pod
		if err := cl.CreateAndGet(t, e2eutil.WindowsPod(ns, "from-image"), &fromImage); err != nil {
			t.Fatalf("the pod wincompat gave windows-2022 was rejected: %v", err)
		}
		if got := ptr.Deref(fromImage.Spec.RuntimeClassName, ""); got != "windows-2022" {
			t.Fatalf("runtimeClassName %q, want windows-2022", got)
		}
		checkMergedByPlugin(t, &fromImage, rc)

		// The pod names the class itself and its image names no build: wincompat then pins only the OS
		// and leaves the build to the class (policy README, build source "runtimeClass"), so the build
		// label in the stored pod can only come from the plugin's merge.
		named := e2eutil.WindowsPod(ns, "names-class")
		named.Spec.Containers[0].Image = "registry.example.com/shop/api"
		named.Spec.RuntimeClassName = ptr.To("windows-2022")
		var stored corev1.Pod
		if err := cl.CreateAndGet(t, named, &stored); err != nil {
			t.Fatalf("a pod naming windows-2022 was rejected: %v", err)
		}
		if e2eutil.HasChange(e2eutil.DecodeChanges(t, stored.Annotations, policy.AnnotationChanges), policy.Inject, "spec.nodeSelector["+corev1.LabelWindowsBuild+"]") {
			t.Errorf("wincompat injected the build label itself; this case no longer shows the plugin's merge")
		}
		checkMergedByPlugin(t, &stored, rc)
		t.Logf("stored pods: from-image nodeSelector %v; names-class nodeSelector %v (build label merged by the RuntimeClass plugin), tolerations %d",
			fromImage.Spec.NodeSelector, stored.Spec.NodeSelector, len(stored.Spec.Tolerations))
	})
}

// TestRuntimeClassUnmanaged: a class of a catalog name that someone else created before wincompat
// started is never changed; wincompat says so with an Event and the conflicts gauge, and manages the
// rest of the catalog as usual.
func TestRuntimeClassUnmanaged(t *testing.T) {
	cl := e2eutil.NewCluster(t)
	ctx := context.Background()

	// An administrator's own windows-2025, for a dedicated pool of 2025 nodes.
	const poolLabel = "example.com/pool"
	theirs := &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-2025", Labels: map[string]string{"team": "platform"}},
		Handler:    "runhcs-wcow-process",
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: e2eutil.Build2025, poolLabel: "win2025"},
			Tolerations:  []corev1.Toleration{{Key: poolLabel, Operator: corev1.TolerationOpEqual, Value: "win2025", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	e2eutil.Create(ctx, t, cl.C, theirs)
	before := theirs.DeepCopy()

	cl.Serve(t, e2eutil.ManageRuntimeClasses)
	cl.WaitForManagedRuntimeClasses(t, 2)
	for name, build := range map[string]string{"windows-2019": e2eutil.Build2019, "windows-2022": e2eutil.Build2022} {
		rc, _ := cl.GetClass(t, name)
		checkCatalogClass(t, rc, wantCatalogClass(name, build))
	}

	// The reconciler records the conflict: an events.k8s.io/v1 Event about the class. A cluster-scoped
	// object has no namespace, so client-go's events recorder writes it to "default".
	var event eventsv1.Event
	took := e2eutil.Eventually(t, "no NotManaged Event about RuntimeClass windows-2025", func() bool {
		var list eventsv1.EventList
		if err := cl.C.List(ctx, &list); err != nil { // all namespaces
			t.Fatalf("listing events: %v", err)
		}
		i := slices.IndexFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Reason == "NotManaged" && e.Regarding.Kind == "RuntimeClass" && e.Regarding.Name == "windows-2025"
		})
		if i >= 0 {
			event = list.Items[i]
		}
		return i >= 0
	})
	t.Logf("Event after %v in namespace %q: type %s, reason %s, reportingController %q, note %q",
		took.Round(time.Millisecond), event.Namespace, event.Type, event.Reason, event.ReportingController, event.Note)
	if event.Namespace != metav1.NamespaceDefault {
		t.Errorf("the Event is in namespace %q, want %q (where events of cluster-scoped objects go)", event.Namespace, metav1.NamespaceDefault)
	}
	if event.Type != corev1.EventTypeWarning || event.Regarding.UID != before.UID {
		t.Errorf("Event type %s regarding uid %s, want Warning about uid %s", event.Type, event.Regarding.UID, before.UID)
	}
	e2eutil.Eventually(t, "wincompat_runtimeclass_conflicts never became 1", func() bool { return conflictGauge(t) == 1 })

	// More reconciles: a Windows node joins (the reconciler watches Nodes) and a managed class is
	// edited. Once that edit is repaired, windows-2025 has been looked at again, and must be unchanged.
	cl.AddNode(t, e2eutil.TestNode{Name: "win2025-0", OS: "windows", Build: e2eutil.Build2025})
	managed, _ := cl.GetClass(t, "windows-2019")
	managed.Scheduling.Tolerations = nil
	if err := cl.C.Update(ctx, &managed); err != nil {
		t.Fatal(err)
	}
	e2eutil.Eventually(t, "windows-2019's tolerations were not repaired", func() bool {
		got, _ := cl.GetClass(t, "windows-2019")
		return got.Scheduling != nil && len(got.Scheduling.Tolerations) == 1
	})
	after, ok := cl.GetClass(t, "windows-2025")
	switch {
	case !ok:
		t.Fatal("wincompat deleted the unmanaged windows-2025")
	case after.UID != before.UID || after.ResourceVersion != before.ResourceVersion:
		t.Errorf("the unmanaged windows-2025 was changed: uid %s→%s resourceVersion %s→%s; now %+v",
			before.UID, after.UID, before.ResourceVersion, after.ResourceVersion, after)
	case !maps.Equal(after.Labels, before.Labels) || !equality.Semantic.DeepEqual(after.Scheduling, before.Scheduling):
		t.Errorf("the unmanaged windows-2025 was changed: %+v", after)
	}
	if g := conflictGauge(t); g != 1 {
		t.Errorf("wincompat_runtimeclass_conflicts = %v, want 1", g)
	}

	// A pod of the 2025 image: the class exists and selects nothing the pod contradicts, so wincompat
	// names it, and the plugin merges the administrator's pool selector and toleration,
	// which wincompat itself never writes.
	const ns = "unmanaged-class"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
	cl.WaitForAdmission(t, ns, e2eutil.ProbePod(e2eutil.Images2025[0]), "windows-2025 and its node", func(p *corev1.Pod, w []string) bool {
		return ptr.Deref(p.Spec.RuntimeClassName, "") == "windows-2025" && !e2eutil.HasWarning(w, e2eutil.NoReadyNode(e2eutil.Build2025))
	})
	pod := e2eutil.WindowsPod(ns, "ltsc2025")
	pod.Spec.Containers[0].Image = e2eutil.Images2025[0]
	var stored corev1.Pod
	if err := cl.CreateAndGet(t, pod, &stored); err != nil {
		t.Fatalf("the ltsc2025 pod was rejected: %v", err)
	}
	if got := ptr.Deref(stored.Spec.RuntimeClassName, ""); got != "windows-2025" {
		t.Fatalf("runtimeClassName %q, want windows-2025", got)
	}
	checkMergedByPlugin(t, &stored, after)
	var tolerations []string
	for _, tol := range stored.Spec.Tolerations {
		tolerations = append(tolerations, fmt.Sprintf("%s %s %s:%s", tol.Key, tol.Operator, tol.Value, tol.Effect))
	}
	t.Logf("ltsc2025 pod stored with runtimeClassName windows-2025, nodeSelector %v, tolerations %q", stored.Spec.NodeSelector, tolerations)
}
