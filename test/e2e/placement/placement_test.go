package placement

// Issue 4: placement through the real kube-apiserver and the real kube-scheduler.
// The scheduler binds pods to fake Node objects (Ready, labelled, tainted; no kubelet runs, so nothing
// starts), and where it binds them is the oracle: a Windows pod on a Linux node, or on a node of
// another Windows build, would fail to start in a real cluster.

import (
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// catalogClass is the RuntimeClass the default policy's catalog gives a build.
var catalogClass = map[string]string{e2eutil.Build2019: "windows-2019", e2eutil.Build2022: "windows-2022", e2eutil.Build2025: "windows-2025"}

// placementNodes is the mixed cluster of issue 4.
var placementNodes = []e2eutil.TestNode{
	{Name: "linux-0", OS: "linux", Build: ""}, {Name: "linux-1", OS: "linux", Build: ""},
	{Name: "win2019-0", OS: "windows", Build: e2eutil.Build2019}, {Name: "win2019-1", OS: "windows", Build: e2eutil.Build2019},
	{Name: "win2022-0", OS: "windows", Build: e2eutil.Build2022}, {Name: "win2022-1", OS: "windows", Build: e2eutil.Build2022},
}

var categories = []e2eutil.Category{
	{Name: "ltsc2019 image", Want: e2eutil.OnBuild, Build: e2eutil.Build2019},
	{Name: "ltsc2022 image", Want: e2eutil.OnBuild, Build: e2eutil.Build2022},
	{Name: "annotation 2019", Want: e2eutil.OnBuild, Build: e2eutil.Build2019},
	{Name: "annotation ltsc2022", Want: e2eutil.OnBuild, Build: e2eutil.Build2022},
	{Name: "hostProcess", Want: e2eutil.OnAnyWindows, Build: ""},
	{Name: "linux", Want: e2eutil.OnLinux, Build: ""},
	{Name: "ltsc2025 image (no node)", Want: e2eutil.Unbound, Build: e2eutil.Build2025},
}

// randomMix returns n pods: one of each category first, so every row of the table has pods, then a
// random category each.
func randomMix(rnd *rand.Rand, n int) []e2eutil.MixPod {
	out := make([]e2eutil.MixPod, 0, n)
	for i := range n {
		cat := &categories[rnd.Intn(len(categories))]
		if i < len(categories) {
			cat = &categories[i]
		}
		out = append(out, e2eutil.MixPod{Cat: cat, Pod: chartPod(rnd, cat, fmt.Sprintf("p%03d", i))})
	}
	return out
}

func pick(rnd *rand.Rand, list []string) string { return list[rnd.Intn(len(list))] }

// chartPod is a pod of category cat as a typical chart writes it: Windows pods keep the hardened Linux
// security context of the chart's Linux flavour (runAsUser, seccomp, capabilities...), which wincompat
// must strip; half of them also pin kubernetes.io/os=windows, as many charts' values do, but none
// tolerates the Windows taint or names a build label.
func chartPod(rnd *rand.Rand, cat *e2eutil.Category, prefix string) *corev1.Pod {
	slug := strings.ToLower(strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(cat.Name))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + slug, Labels: map[string]string{"category": slug}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr.To(int64(1000 + rnd.Intn(64000))), RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{Name: "app", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
		},
	}
	if rnd.Intn(2) == 0 {
		pod.Spec.SecurityContext.FSGroup = ptr.To[int64](2000)
		pod.Spec.SecurityContext.RunAsGroup = ptr.To[int64](3000)
	}
	app := &pod.Spec.Containers[0]
	switch cat.Name {
	case "ltsc2019 image":
		app.Image = pick(rnd, e2eutil.Images2019)
		if rnd.Intn(3) == 0 { // an init container of the same build also votes for it
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "mcr.microsoft.com/windows/nanoserver:1809"}}
		}
	case "ltsc2022 image":
		app.Image = pick(rnd, e2eutil.Images2022)
	case "annotation 2019", "annotation ltsc2022":
		app.Image = pick(rnd, e2eutil.ImagesTagless)
		pod.Annotations = map[string]string{policy.AnnotationBuild: e2eutil.AnnotationOfCat[cat.Name]}
	case "ltsc2025 image (no node)":
		app.Image = pick(rnd, e2eutil.Images2025)
	case "hostProcess":
		// A node agent: the Linux chart runs it as root, privileged, on the host network; on Windows it
		// is a HostProcess pod as SYSTEM.
		app.Image = pick(rnd, e2eutil.ImagesHost)
		pod.Spec.HostNetwork = true
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsUser: ptr.To[int64](0),
			WindowsOptions: &corev1.WindowsSecurityContextOptions{
				HostProcess: ptr.To(true), RunAsUserName: ptr.To(`NT AUTHORITY\SYSTEM`),
			},
		}
		app.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0)}
	case "linux":
		app.Image = pick(rnd, e2eutil.ImagesLinux)
		switch rnd.Intn(3) { // declared, pinned, or neither: none reaches wincompat
		case 0:
			pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
		case 1:
			pod.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
		}
		return pod
	}
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	if rnd.Intn(2) == 0 {
		pod.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "windows"}
	}
	return pod
}

// withoutRejectedFields returns a copy of a Windows pod without the fields the API server rejects for
// os windows, as a user who fixed validation by hand would write it, and the names of the
// fields it removed. Written here, independently of policy's strip table: the baseline must not lean
// on the code under test. Linux pods are returned as they are.
func withoutRejectedFields(pod *corev1.Pod) (*corev1.Pod, []string) {
	out := pod.DeepCopy()
	if out.Spec.OS == nil || out.Spec.OS.Name != corev1.Windows {
		return out, nil
	}
	var removed []string
	note := func(set bool, name string) {
		if set {
			removed = append(removed, name)
		}
	}
	if sc := out.Spec.SecurityContext; sc != nil {
		note(sc.RunAsUser != nil, "spec.securityContext.runAsUser")
		note(sc.RunAsGroup != nil, "spec.securityContext.runAsGroup")
		note(sc.FSGroup != nil, "spec.securityContext.fsGroup")
		note(sc.SeccompProfile != nil, "spec.securityContext.seccompProfile")
		out.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: sc.RunAsNonRoot, WindowsOptions: sc.WindowsOptions}
	}
	for i := range out.Spec.Containers {
		c := &out.Spec.Containers[i]
		if sc := c.SecurityContext; sc != nil {
			note(sc.RunAsUser != nil, "securityContext.runAsUser")
			note(sc.AllowPrivilegeEscalation != nil, "securityContext.allowPrivilegeEscalation")
			note(sc.ReadOnlyRootFilesystem != nil, "securityContext.readOnlyRootFilesystem")
			note(sc.Capabilities != nil, "securityContext.capabilities")
			note(sc.Privileged != nil, "securityContext.privileged")
			c.SecurityContext = &corev1.SecurityContext{RunAsNonRoot: sc.RunAsNonRoot, WindowsOptions: sc.WindowsOptions}
		}
	}
	return out, removed
}

// outcome of one pod against its category.
type outcome int

const (
	rightNode outcome = iota
	wrongNode
	pending
)

func placementOf(p *e2eutil.Placed, nodes map[string]e2eutil.TestNode) outcome {
	name := p.Stored.Spec.NodeName
	if name == "" {
		return pending
	}
	n := nodes[name]
	switch p.Cat.Want {
	case e2eutil.OnBuild:
		if n.OS == "windows" && n.Build == p.Cat.Build {
			return rightNode
		}
	case e2eutil.OnAnyWindows:
		if n.OS == "windows" {
			return rightNode
		}
	case e2eutil.OnLinux:
		if n.OS == "linux" {
			return rightNode
		}
	}
	return wrongNode // including any binding of a pod that has no node of its build
}

// correct: where the pod belongs, which for a build with no node is nowhere.
func correct(p *e2eutil.Placed, nodes map[string]e2eutil.TestNode) bool {
	o := placementOf(p, nodes)
	return o == rightNode || (p.Cat.Want == e2eutil.Unbound && o == pending)
}

// placementTable renders category x (right node / wrong node / pending / correct) and returns how many
// pods are correctly placed. extra adds a column per pod (empty header: none).
func placementTable(pods []*e2eutil.Placed, nodes map[string]e2eutil.TestNode, extraHeader string, extra func(*e2eutil.Placed) bool) (string, int) {
	type row struct{ pods, right, wrong, pending, correct, extra int }
	rows := map[string]*row{}
	var total row
	for _, p := range pods {
		r := rows[p.Cat.Name]
		if r == nil {
			r = &row{}
			rows[p.Cat.Name] = r
		}
		for _, r := range []*row{r, &total} {
			r.pods++
			switch placementOf(p, nodes) {
			case rightNode:
				r.right++
			case wrongNode:
				r.wrong++
			case pending:
				r.pending++
			}
			if correct(p, nodes) {
				r.correct++
			}
			if extra != nil && extra(p) {
				r.extra++
			}
		}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "category\tpods\ton a right node\ton a wrong node\tpending\tcorrect\t"
	if extra != nil {
		header += extraHeader + "\t"
	}
	fmt.Fprintln(tw, header)
	line := func(name string, r *row) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d (%.0f%%)\t", name, r.pods, r.right, r.wrong, r.pending, r.correct, 100*float64(r.correct)/float64(max(r.pods, 1)))
		if extra != nil {
			fmt.Fprintf(tw, "%d\t", r.extra)
		}
		fmt.Fprintln(tw)
	}
	for _, c := range categories {
		if r := rows[c.Name]; r != nil {
			line(c.Name, r)
		}
	}
	line("total", &total)
	tw.Flush()
	return b.String(), total.correct
}

// placementSeed is PLACEMENT_SEED when set, so that a failing mix can be replayed, else a fixed seed so
// that every run checks the same 200 pods.
func placementSeed(t *testing.T) int64 {
	t.Helper()
	if s := os.Getenv("PLACEMENT_SEED"); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("PLACEMENT_SEED=%q: %v", s, err)
		}
		return seed
	}
	return 20260401
}

// TestPlacement: issue 4. 200 pods of a random mix, through wincompat, are bound by the real scheduler
// exactly where they can run; the same pods without wincompat (fixed by hand only as far as validation
// demands) are not; and a Windows Server 2025 node that joins later is used without restarting wincompat.
func TestPlacement(t *testing.T) {
	began := time.Now()
	cl := e2eutil.StartClusterWith(t, []controlplane.Option{controlplane.WithScheduler()},
		func(o *server.Options) { o.ManageRuntimeClasses = true })
	t.Logf("control plane, kube-scheduler and wincompat up in %v", time.Since(began).Round(time.Millisecond))

	nodes := map[string]e2eutil.TestNode{}
	for _, n := range placementNodes {
		cl.AddNode(t, n)
		nodes[n.Name] = n
	}
	const ns, baselineNS = "placement", "placement-baseline"
	cl.NewNamespace(t, ns, map[string]string{policy.LabelEnabled: "true"})
	cl.NewNamespace(t, baselineNS, nil)

	// Pods created before wincompat's cache holds the nodes and classes would be admitted against an
	// empty cluster (no RuntimeClass, every build "without a ready node"): wait for both.
	cl.WaitForManagedRuntimeClasses(t, 3)
	waited := cl.WaitForAdmission(t, ns, e2eutil.ProbePod(e2eutil.Images2019[0]), "windows-2019 and the 2019 nodes", func(p *corev1.Pod, w []string) bool {
		return ptr.Deref(p.Spec.RuntimeClassName, "") == "windows-2019" && !e2eutil.HasWarning(w, e2eutil.NoReadyNode(e2eutil.Build2019))
	})
	waited += cl.WaitForAdmission(t, ns, e2eutil.ProbePod(e2eutil.Images2022[0]), "windows-2022 and the 2022 nodes", func(p *corev1.Pod, w []string) bool {
		return ptr.Deref(p.Spec.RuntimeClassName, "") == "windows-2022" && !e2eutil.HasWarning(w, e2eutil.NoReadyNode(e2eutil.Build2022))
	})
	waited += cl.WaitForAdmission(t, ns, e2eutil.ProbePod(e2eutil.Images2025[0]), "windows-2025", func(p *corev1.Pod, _ []string) bool {
		return ptr.Deref(p.Spec.RuntimeClassName, "") == "windows-2025"
	})
	t.Logf("nodes and RuntimeClasses reached wincompat's admission after %v", waited.Round(time.Millisecond))

	seed := placementSeed(t)
	t.Logf("seed %d (PLACEMENT_SEED=%d replays this mix)", seed, seed)
	rnd := rand.New(rand.NewSource(seed))
	mix := randomMix(rnd, 200)

	var withWincompat []*e2eutil.Placed
	t.Run("with wincompat", func(t *testing.T) {
		start := time.Now()
		withWincompat = cl.CreateMix(t, ns, mix, func(p *corev1.Pod) *corev1.Pod { return p.DeepCopy() })
		created := time.Since(start)
		// Every pod that can be bound is bound; those of a build with no node are found unschedulable.
		took := cl.Settle(t, ns, withWincompat, func(p *e2eutil.Placed) bool {
			if p.Cat.Want == e2eutil.Unbound {
				return e2eutil.Unschedulable(p.Stored)
			}
			return p.Stored.Spec.NodeName != ""
		})
		withClass := func(p *e2eutil.Placed) bool { return p.Stored.Spec.RuntimeClassName != nil }
		table, ok := placementTable(withWincompat, nodes, "with RuntimeClass", withClass)
		t.Logf("placement WITH wincompat (created in %v, scheduled in %v):\n%s", created.Round(time.Millisecond), took.Round(time.Millisecond), table)
		if ok != len(withWincompat) {
			t.Errorf("%d of %d pods correctly placed, want all", ok, len(withWincompat))
		}

		classes := 0
		for _, p := range withWincompat {
			pod := p.Stored
			where := pod.Spec.NodeName
			if where == "" {
				where = "(pending)"
			}
			if !correct(p, nodes) {
				t.Errorf("%s (%s, image %s): on %s; nodeSelector %v, runtimeClassName %v, tolerations %v",
					pod.Name, p.Cat.Name, pod.Spec.Containers[0].Image, where, pod.Spec.NodeSelector, ptr.Deref(pod.Spec.RuntimeClassName, ""), pod.Spec.Tolerations)
			}
			if p.Cat.Windows() && pod.Annotations[policy.AnnotationVersion] != "e2e" {
				t.Errorf("%s (%s): not processed by wincompat; annotations %v", pod.Name, p.Cat.Name, pod.Annotations)
			}
			if !p.Cat.Windows() && len(e2eutil.WincompatAnnotations(pod.Annotations)) > 0 {
				t.Errorf("%s is a Linux pod, but carries %v", pod.Name, e2eutil.WincompatAnnotations(pod.Annotations))
			}
			// The no-ready-node warning, exactly for the build that has no node.
			for _, b := range []string{e2eutil.Build2019, e2eutil.Build2022, e2eutil.Build2025} {
				if got, want := e2eutil.HasWarning(p.Warnings, e2eutil.NoReadyNode(b)), p.Cat.Build == b && b == e2eutil.Build2025; got != want {
					t.Errorf("%s (%s): warning %q present=%v, want %v; warnings %q", pod.Name, p.Cat.Name, e2eutil.NoReadyNode(b), got, want, p.Warnings)
				}
			}
			// The RuntimeClass: set exactly when a build was chosen, and such pods were admitted, so they
			// passed the RuntimeClass admission plugin, which rejects a nodeSelector that contradicts the
			// class's.
			wantClass := catalogClass[p.Cat.Build]
			if got := ptr.Deref(pod.Spec.RuntimeClassName, ""); got != wantClass {
				t.Errorf("%s (%s): runtimeClassName %q, want %q", pod.Name, p.Cat.Name, got, wantClass)
			}
			if wantClass != "" {
				classes++
				if !e2eutil.HasChange(e2eutil.DecodeChanges(t, pod.Annotations, policy.AnnotationChanges), policy.Inject, "spec.runtimeClassName") {
					t.Errorf("%s: %s does not record the runtimeClassName it set", pod.Name, policy.AnnotationChanges)
				}
			}
		}
		t.Logf("%d pods got their RuntimeClass from wincompat and were admitted by the RuntimeClass admission plugin", classes)
		if classes == 0 {
			t.Error("no pod got a RuntimeClass")
		}
	})

	t.Run("baseline without wincompat", func(t *testing.T) {
		removedFrom, removed := 0, map[string]int{}
		start := time.Now()
		baseline := cl.CreateMix(t, baselineNS, mix, func(p *corev1.Pod) *corev1.Pod {
			out, fields := withoutRejectedFields(p)
			if len(fields) > 0 {
				removedFrom++
			}
			for _, f := range fields {
				removed[f]++
			}
			return out
		})
		created := time.Since(start)
		var fields []string
		for f, n := range removed {
			fields = append(fields, fmt.Sprintf("%s (%d)", f, n))
		}
		slices.Sort(fields)
		t.Logf("baseline: removed from %d Windows pods the fields the API server rejects for os windows, kept spec.os.name=windows: %s",
			removedFrom, strings.Join(fields, ", "))
		for _, p := range baseline {
			if v, set := p.Stored.Annotations[policy.AnnotationVersion]; set {
				t.Fatalf("%s was processed by wincompat (%s=%s) in the unlabelled namespace", p.Stored.Name, policy.AnnotationVersion, v)
			}
		}
		took := cl.Settle(t, baselineNS, baseline, nil)
		table, ok := placementTable(baseline, nodes, "", nil)
		t.Logf("placement WITHOUT wincompat (created in %v, scheduled in %v):\n%s", created.Round(time.Millisecond), took.Round(time.Millisecond), table)
		wrong, stuck := 0, 0
		for _, p := range baseline {
			if correct(p, nodes) {
				continue
			}
			if p.Stored.Spec.NodeName != "" {
				wrong++
			} else {
				stuck++
			}
		}
		t.Logf("baseline: %d of %d pods bound to a wrong node (Linux or another Windows build), %d Pending although a node of their build exists", wrong, len(baseline), stuck)
		if ok == len(baseline) {
			t.Errorf("without wincompat all %d pods were placed correctly: the comparison shows nothing", ok)
		}
	})

	t.Run("Windows Server 2025 node joins", func(t *testing.T) {
		if withWincompat == nil {
			t.Fatal("needs the pods of the placement with wincompat, which were not created")
		}
		var earlier []*e2eutil.Placed
		wasPending := map[string]bool{}
		for _, p := range withWincompat {
			if p.Cat.Want == e2eutil.Unbound {
				earlier = append(earlier, p)
				wasPending[p.Stored.Name] = true
			}
		}
		n := e2eutil.TestNode{Name: "win2025-0", OS: "windows", Build: e2eutil.Build2025}
		cl.AddNode(t, n)
		nodes[n.Name] = n
		// Same wincompat process: its node informer must bring the new node to admission.
		waited := cl.WaitForAdmission(t, ns, e2eutil.ProbePod(e2eutil.Images2025[0]), "the 2025 node", func(_ *corev1.Pod, w []string) bool {
			return !e2eutil.HasWarning(w, e2eutil.NoReadyNode(e2eutil.Build2025))
		})
		t.Logf("the new node reached wincompat's admission after %v", waited.Round(time.Millisecond))

		cat2025 := &categories[slices.IndexFunc(categories, func(c e2eutil.Category) bool { return c.Build == e2eutil.Build2025 })]
		var fresh []e2eutil.MixPod
		for i := range 10 {
			fresh = append(fresh, e2eutil.MixPod{Cat: cat2025, Pod: chartPod(rnd, cat2025, fmt.Sprintf("n%03d", i))})
		}
		added := cl.CreateMix(t, ns, fresh, func(p *corev1.Pod) *corev1.Pod { return p.DeepCopy() })
		for _, p := range added {
			if e2eutil.HasWarning(p.Warnings, "no ready node") {
				t.Errorf("%s: admitted with %q after the 2025 node joined", p.Stored.Name, p.Warnings)
			}
			if got := ptr.Deref(p.Stored.Spec.RuntimeClassName, ""); got != "windows-2025" {
				t.Errorf("%s: runtimeClassName %q, want windows-2025", p.Stored.Name, got)
			}
		}
		all := append(slices.Clone(earlier), added...)
		took := cl.Settle(t, ns, all, func(p *e2eutil.Placed) bool { return p.Stored.Spec.NodeName != "" })
		boundEarlier, boundNew := 0, 0
		for _, p := range all {
			if p.Stored.Spec.NodeName != n.Name {
				t.Errorf("%s: on %q, want %s", p.Stored.Name, p.Stored.Spec.NodeName, n.Name)
				continue
			}
			if wasPending[p.Stored.Name] {
				boundEarlier++
			} else {
				boundNew++
			}
		}
		t.Logf("after the 2025 node joined: %d of %d earlier pending ltsc2025 pods and %d of %d new ones bound to %s within %v",
			boundEarlier, len(earlier), boundNew, len(added), n.Name, took.Round(time.Millisecond))
	})
	t.Logf("TestPlacement took %v", time.Since(began).Round(time.Millisecond))
}
