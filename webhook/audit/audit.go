// Package audit reads what wincompat recorded on Pods and workload templates, page by page so that it
// works on clusters with a hundred thousand pods, and reports it per namespace, per change and per
// object, with findings about coverage and placement.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
)

// Options say what to read.
type Options struct {
	// Namespaces to read; empty reads all.
	Namespaces []string
	// Selector filters Pods and workloads by label.
	Selector labels.Selector
	// PageSize is the number of objects per list call.
	PageSize int64
	// Objects keeps one row per object (the objects view); off, memory stays bounded by the number of
	// namespaces and distinct changes, whatever the number of pods.
	Objects bool
	// Progress receives a progress line when listing takes longer than a second; nil for none.
	Progress io.Writer
	// Policy gives the catalog of builds and the compatibility rule; nil is the built-in policy.
	Policy *policy.Policy
	// Builds, when set, asks of every Windows pod and template whether it could run if the cluster's
	// Windows nodes ran only these builds (numbers, see ParseBuilds): the migration planner.
	Builds []string
	// Images, when set, is asked what registries say of the images; nil judges images by their tags
	// alone, so that an audit stays hermetic unless asked.
	Images ImageResolver
}

// Report is everything the audit found. Every list is sorted, so output is stable.
type Report struct {
	Namespaces []NamespaceRow `json:"namespaces"`
	Changes    []ChangeRow    `json:"changes"`
	Objects    []ObjectRow    `json:"objects,omitempty"`
	Findings   []Finding      `json:"findings"`
	// Incomplete lists what could not be read (a namespace without list permission); the rest of the
	// report stands.
	Incomplete []string `json:"incomplete,omitempty"`
	// Notes say how the report was read when that differs from the plain way (namespace by namespace
	// because a cluster-wide list was refused, say); they do not make it incomplete.
	Notes []string `json:"notes,omitempty"`
	// Truncated counts findings left out beyond the first maxFindingsPerKind of each kind.
	Truncated map[string]int `json:"truncated,omitempty"`
	// Builds answers Options.Builds; nil without it.
	Builds *BuildsSummary `json:"builds,omitempty"`
}

// maxFindingsPerKind bounds memory on a cluster where thousands of pods share one problem; the count of
// the rest is kept.
const maxFindingsPerKind = 1000

// NamespaceRow counts one namespace's Windows pods and workloads.
type NamespaceRow struct {
	Namespace   string `json:"namespace"`
	OptedIn     bool   `json:"optedIn"`
	WindowsPods int    `json:"windowsPods"`
	Covered     int    `json:"covered"` // carry wincompat.io/version
	Changed     int    `json:"changed"` // carry wincompat.io/changes
	Workloads   int    `json:"workloads"`
	Templates   int    `json:"templatesChanged"`
	// WouldChange counts the objects warn mode left as they came that enforce mode would change.
	WouldChange int `json:"wouldChange,omitempty"`
}

// ChangeRow counts one kind of change: "strip spec.securityContext.runAsUser: 412 objects in 9 namespaces".
type ChangeRow struct {
	Action     string `json:"action"`
	Field      string `json:"field"`
	Pods       int    `json:"pods"`
	Templates  int    `json:"templates"`
	Namespaces int    `json:"namespaces"`
}

// ObjectRow is one Windows pod or changed workload.
type ObjectRow struct {
	Namespace   string `json:"namespace"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Covered     bool   `json:"covered"`
	Changes     int    `json:"changes"`
	Build       string `json:"build,omitempty"`
	BuildSource string `json:"buildSource,omitempty"`
	Node        string `json:"node,omitempty"`
	NodeBuild   string `json:"nodeBuild,omitempty"`
}

// Kinds of finding.
const (
	NotCovered         = "not-covered"
	BuildMismatch      = "build-mismatch"
	PendingNoBuild     = "pending-no-build"
	NamespaceUnlabeled = "namespace-not-labelled"
	BadAnnotation      = "bad-annotation"
	// BuildNotInImage: pinned to builds none of which its images can run on.
	BuildNotInImage = "build-not-in-image"
	// LinuxOnlyImage: a Windows pod or template with an image that has no Windows entry, as its
	// registry says (--resolve-images) or admission recorded.
	LinuxOnlyImage = "linux-only-image"
	// CannotRunOnBuilds: with --builds, a pod or template no build asked about could run.
	CannotRunOnBuilds = "cannot-run-on-builds"
	// WouldChange: an object in a namespace in warn mode that wincompat would change in enforce mode.
	WouldChange = "would-change"
	// WithoutBuildDecision: a Windows pod the admission policies (hybrid engine) admitted while the
	// webhook did not answer.
	WithoutBuildDecision = "admitted-without-build-decision"
)

// Finding is something a platform engineer should look at.
type Finding struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Object    string `json:"object,omitempty"` // Kind/name
	Detail    string `json:"detail"`
}

// workloadLists are the eight kinds whose templates wincompat annotates, with their API groups and list
// types. A controller comes before the kinds it controls (CronJob before Job), so that when an object is
// read, whether its controller was read is already known (controlledByRead).
var workloadLists = []workloadList{
	{"Deployment", "apps", func() client.ObjectList { return &appsv1.DeploymentList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*appsv1.DeploymentList).Items, func(o *appsv1.Deployment) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"ReplicaSet", "apps", func() client.ObjectList { return &appsv1.ReplicaSetList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*appsv1.ReplicaSetList).Items, func(o *appsv1.ReplicaSet) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"StatefulSet", "apps", func() client.ObjectList { return &appsv1.StatefulSetList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*appsv1.StatefulSetList).Items, func(o *appsv1.StatefulSet) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"DaemonSet", "apps", func() client.ObjectList { return &appsv1.DaemonSetList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*appsv1.DaemonSetList).Items, func(o *appsv1.DaemonSet) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"CronJob", "batch", func() client.ObjectList { return &batchv1.CronJobList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*batchv1.CronJobList).Items, func(o *batchv1.CronJob) templateOf {
			return templateOf{o.ObjectMeta, o.Spec.JobTemplate.Spec.Template}
		})
	}},
	{"Job", "batch", func() client.ObjectList { return &batchv1.JobList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*batchv1.JobList).Items, func(o *batchv1.Job) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"ReplicationController", "", func() client.ObjectList { return &corev1.ReplicationControllerList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*corev1.ReplicationControllerList).Items, func(o *corev1.ReplicationController) templateOf {
			if o.Spec.Template == nil {
				return templateOf{meta: o.ObjectMeta}
			}
			return templateOf{o.ObjectMeta, *o.Spec.Template}
		})
	}},
	{"PodTemplate", "", func() client.ObjectList { return &corev1.PodTemplateList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*corev1.PodTemplateList).Items, func(o *corev1.PodTemplate) templateOf { return templateOf{o.ObjectMeta, o.Template} })
	}},
}

type workloadList struct {
	kind, group string
	list        func() client.ObjectList
	tpl         func(client.ObjectList) []templateOf
}

type templateOf struct {
	meta metav1.ObjectMeta
	tpl  corev1.PodTemplateSpec
}

func templates[T any](items []T, f func(*T) templateOf) []templateOf {
	out := make([]templateOf, len(items))
	for i := range items {
		out[i] = f(&items[i])
	}
	return out
}

// auditor accumulates the report while pages stream by.
type auditor struct {
	opts       Options
	c          client.Reader
	namespaces map[string]*corev1.Namespace
	// labelsUnknown are namespaces whose labels could not be read: no finding claims they are unlabelled.
	labelsUnknown map[string]bool
	nodeBuild     map[string]string // node name -> Windows build
	readyBuild    map[string]bool
	nodesKnown    bool
	rows          map[string]*NamespaceRow
	changes       changeTally
	perKind       map[string]int // findings kept per kind
	report        Report
	listed        int
	start         time.Time
	lastProg      time.Time
	pol           *policy.Policy
	// images holds what registries said of each image asked about, so each is asked once per run.
	images       map[string]policy.Image
	lookupErrors int
	lookupFailed []string // the first few, for the note
	classBuilds  map[string]string
	classNoted   bool
	reasons      map[string]*ReasonRow
	// windowsNodes are the ready Windows nodes, for the Linux-side findings (linux.go).
	windowsNodes    []*windowsNode
	windowsPodsSeen bool
	// cluster is what warn mode's decisions and the Linux-side findings read of the cluster
	// (clusterFacts); clusterErr says why it could not be read.
	cluster                      *policy.Cluster
	clusterErr                   error
	clusterRead                  bool
	warnFactsNoted, osClassNoted bool
	// kindsRead marks the workload kinds read completely, by kind and scope ("Deployment/" for all
	// namespaces): an object such a kind controls is judged through its controller.
	kindsRead map[string]bool
	// ownersRead are, with a label selector, the UIDs of the workloads read: a selector may pick an
	// object and not its controller. Without one, kindsRead says as much in constant memory.
	ownersRead map[types.UID]bool
}

// changeTally counts changes per (action, field): in how many pods and templates, and namespaces. The
// cluster report and the audit-log summary both build their change rows with it.
type changeTally map[[2]string]*changeAcc

type changeAcc struct {
	pods, templates int
	namespaces      map[string]bool
}

// add counts one object's changes; several containers of one object count once.
func (t changeTally) add(changes []policy.Change, ns string, pod bool) {
	seen := map[[2]string]bool{}
	for _, c := range changes {
		k := [2]string{string(c.Action), c.Field()}
		if seen[k] {
			continue
		}
		seen[k] = true
		acc, ok := t[k]
		if !ok {
			acc = &changeAcc{namespaces: map[string]bool{}}
			t[k] = acc
		}
		if pod {
			acc.pods++
		} else {
			acc.templates++
		}
		acc.namespaces[ns] = true
	}
}

// rows are the tallies, most frequent first, then by action and field.
func (t changeTally) rows() []ChangeRow {
	out := make([]ChangeRow, 0, len(t))
	for k, acc := range t {
		out = append(out, ChangeRow{Action: k[0], Field: k[1], Pods: acc.pods, Templates: acc.templates, Namespaces: len(acc.namespaces)})
	}
	sort.Slice(out, func(i, j int) bool {
		ci, cj := out[i], out[j]
		if ci.Pods+ci.Templates != cj.Pods+cj.Templates {
			return ci.Pods+ci.Templates > cj.Pods+cj.Templates
		}
		return ci.Action+ci.Field < cj.Action+cj.Field
	})
	return out
}

// Run reads the cluster and builds the report. An error is returned only when nothing useful could be
// read (the cluster is unreachable, say); partial failures go into Report.Incomplete.
func Run(ctx context.Context, c client.Reader, opts Options) (*Report, error) {
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	if opts.Selector == nil {
		opts.Selector = labels.Everything()
	}
	a := &auditor{opts: opts, c: c, namespaces: map[string]*corev1.Namespace{}, labelsUnknown: map[string]bool{}, nodeBuild: map[string]string{},
		readyBuild: map[string]bool{}, rows: map[string]*NamespaceRow{}, changes: changeTally{}, perKind: map[string]int{}, start: time.Now(),
		pol: opts.Policy, images: map[string]policy.Image{}, classBuilds: map[string]string{}, reasons: map[string]*ReasonRow{},
		kindsRead: map[string]bool{}, ownersRead: map[types.UID]bool{}}
	if a.pol == nil {
		a.pol = policy.Default()
	}
	if len(opts.Builds) > 0 {
		a.report.Builds = &BuildsSummary{Builds: opts.Builds}
	}
	if err := a.readNamespaces(ctx); err != nil {
		return nil, err
	}
	a.readNodes(ctx)
	if err := a.readPods(ctx); err != nil {
		return nil, err
	}
	a.readWorkloads(ctx)
	a.finish()
	if a.opts.Progress != nil && time.Since(a.start) > time.Second {
		fmt.Fprintf(a.opts.Progress, "\rread %d objects in %s\n", a.listed, time.Since(a.start).Round(time.Millisecond))
	}
	return &a.report, nil
}

func (a *auditor) readNamespaces(ctx context.Context) error {
	if len(a.opts.Namespaces) > 0 {
		for _, name := range a.opts.Namespaces {
			var ns corev1.Namespace
			if err := a.c.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
				if apierrors.IsNotFound(err) {
					return fmt.Errorf("namespace %s not found", name)
				}
				if apierrors.IsForbidden(err) {
					// Its labels are unknown, but its pods may still be readable.
					a.report.Incomplete = append(a.report.Incomplete, fmt.Sprintf("namespace %s: cannot read its labels (%s)", name, reason(err)))
					ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
					a.labelsUnknown[name] = true
				} else {
					return fmt.Errorf("reading namespace %s: %w", name, err)
				}
			}
			a.namespaces[name] = &ns
		}
		return nil
	}
	var list corev1.NamespaceList
	if err := a.c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range list.Items {
		a.namespaces[list.Items[i].Name] = &list.Items[i]
	}
	return nil
}

// readNodes learns each node's Windows build; without permission, build findings are skipped.
func (a *auditor) readNodes(ctx context.Context) {
	err := a.paginate(ctx, "", func() client.ObjectList { return &corev1.NodeList{} }, nil, func(l client.ObjectList) {
		for _, n := range l.(*corev1.NodeList).Items {
			if n.Labels[corev1.LabelOSStable] == string(corev1.Windows) && inventory.NodeReady(&n) {
				a.keepWindowsNode(&n)
			}
			if b := n.Labels[corev1.LabelWindowsBuild]; b != "" && n.Labels[corev1.LabelOSStable] == string(corev1.Windows) {
				a.nodeBuild[n.Name] = b
				if inventory.NodeReady(&n) {
					a.readyBuild[b] = true
				}
			}
		}
	})
	if err != nil {
		a.report.Incomplete = append(a.report.Incomplete, "nodes: "+reason(err)+"; build findings skipped")
		return
	}
	a.nodesKnown = true
}

// readPods lists pods cluster-wide when it may, else namespace by namespace, keeping what it can read.
func (a *auditor) readPods(ctx context.Context) error {
	newList := func() client.ObjectList { return &corev1.PodList{} }
	visit := func(l client.ObjectList) {
		pods := l.(*corev1.PodList).Items
		var specs []*corev1.PodSpec
		for i := range pods {
			if windowsPod(&pods[i]) {
				specs = append(specs, &pods[i].Spec)
			}
		}
		a.resolve(ctx, specs)
		for i := range pods {
			a.pod(ctx, &pods[i])
		}
	}
	if len(a.opts.Namespaces) == 0 {
		err := a.paginate(ctx, "", newList, a.opts.Selector, visit)
		if err == nil {
			return nil
		}
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("listing pods: %w", err)
		}
		a.report.Notes = append(a.report.Notes, "pods in all namespaces: "+reason(err)+"; read namespace by namespace instead")
	}
	for _, ns := range sortedKeys(a.namespaces) {
		if err := a.paginate(ctx, ns, newList, a.opts.Selector, visit); err != nil {
			if apierrors.IsForbidden(err) {
				a.report.Incomplete = append(a.report.Incomplete, fmt.Sprintf("pods in %s: %s", ns, reason(err)))
				continue
			}
			return fmt.Errorf("listing pods in %s: %w", ns, err)
		}
	}
	return nil
}

func (a *auditor) readWorkloads(ctx context.Context) {
	scopes := []string{""}
	if len(a.opts.Namespaces) > 0 {
		scopes = sortedKeys(a.namespaces)
	}
	for _, w := range workloadLists {
		for _, ns := range scopes {
			err := a.paginate(ctx, ns, w.list, a.opts.Selector, func(l client.ObjectList) {
				tpls := w.tpl(l)
				var specs []*corev1.PodSpec
				for i := range tpls {
					if _, recorded := tpls[i].tpl.Annotations[policy.AnnotationTemplateChanges]; recorded || isWindows(&tpls[i].tpl.Spec) {
						specs = append(specs, &tpls[i].tpl.Spec)
					}
				}
				a.resolve(ctx, specs)
				for _, t := range tpls {
					a.template(ctx, w.kind, t)
				}
			})
			if err == nil {
				a.kindsRead[w.kind+"/"+ns] = true
			} else {
				where := "all namespaces"
				if ns != "" {
					where = ns
				}
				a.report.Incomplete = append(a.report.Incomplete, fmt.Sprintf("%s in %s: %s", w.kind, where, reason(err)))
			}
		}
	}
}

// paginate lists page by page (limit and continue), so memory holds one page at a time.
func (a *auditor) paginate(ctx context.Context, ns string, newList func() client.ObjectList, sel labels.Selector, visit func(client.ObjectList)) error {
	cont := ""
	for {
		l := newList()
		opts := []client.ListOption{client.Limit(a.opts.PageSize), client.Continue(cont)}
		if ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if sel != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
		if err := a.c.List(ctx, l, opts...); err != nil {
			return err
		}
		visit(l)
		a.progress(l)
		cont = l.(metav1.ListInterface).GetContinue()
		if cont == "" {
			return nil
		}
	}
}

func (a *auditor) progress(l client.ObjectList) {
	if items, err := metaItems(l); err == nil {
		a.listed += items
	}
	if a.opts.Progress == nil || time.Since(a.start) < time.Second || time.Since(a.lastProg) < 200*time.Millisecond {
		return
	}
	a.lastProg = time.Now()
	fmt.Fprintf(a.opts.Progress, "\rread %d objects...", a.listed)
}

func metaItems(l client.ObjectList) (int, error) {
	items, err := apimeta.ExtractList(l)
	return len(items), err
}

func (a *auditor) row(ns string) *NamespaceRow {
	r, ok := a.rows[ns]
	if !ok {
		r = &NamespaceRow{Namespace: ns}
		if n := a.namespaces[ns]; n != nil {
			r.OptedIn = n.Labels[policy.LabelEnabled] == "true"
		}
		a.rows[ns] = r
	}
	return r
}

func isWindows(spec *corev1.PodSpec) bool {
	if spec.OS != nil {
		return spec.OS.Name == corev1.Windows
	}
	return spec.NodeSelector[corev1.LabelOSStable] == string(corev1.Windows)
}

// windowsPod: a Windows pod, or one wincompat recorded itself on (it judged the pod Windows).
func windowsPod(p *corev1.Pod) bool {
	_, recorded := p.Annotations[policy.AnnotationVersion]
	_, byPolicy := p.Annotations[policy.AnnotationAdmissionPolicy]
	return recorded || byPolicy || isWindows(&p.Spec)
}

func (a *auditor) pod(ctx context.Context, p *corev1.Pod) {
	warnMode := a.warnMode(p.Namespace)
	if warnMode {
		a.wouldChange(ctx, p.Namespace, "Pod/"+p.Name, p.DeepCopy())
	}
	if !windowsPod(p) {
		a.linuxPod(ctx, p)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref == nil || ref.Kind != "DaemonSet" {
		// A daemon pod tolerates whatever its node carries; it says nothing of where workloads can go.
		a.noteTolerations(&p.Spec)
	}
	_, recorded := p.Annotations[policy.AnnotationVersion]
	r := a.row(p.Namespace)
	r.WindowsPods++
	obj := "Pod/" + p.Name
	row := ObjectRow{Namespace: p.Namespace, Kind: "Pod", Name: p.Name, Covered: recorded, Node: p.Spec.NodeName}
	if source := p.Annotations[policy.AnnotationBuildSource]; recorded && source != "" {
		// Only wincompat's own decision: a user's wincompat.io/build on a pod wincompat never saw is a
		// request ("ltsc2022"), not a build number.
		row.Build, row.BuildSource = p.Annotations[policy.AnnotationBuild], source
	}
	switch _, byPolicy := p.Annotations[policy.AnnotationAdmissionPolicy]; {
	case recorded:
		r.Covered++
	case warnMode:
		// Not changed on purpose: the would-change finding says what enforce mode would do.
	case byPolicy:
		a.finding(WithoutBuildDecision, p.Namespace, obj, "admitted by wincompat's admission policies while the webhook did not answer: valid and on a Windows node, but no build was chosen (no windows-build pin or RuntimeClass); pods created now get one")
	default:
		a.finding(NotCovered, p.Namespace, obj, a.whyNotCovered(p))
	}
	var changes []policy.Change
	if s, ok := p.Annotations[policy.AnnotationChanges]; ok {
		var err error
		changes, err = policy.DecodeChanges(s)
		if err != nil {
			a.finding(BadAnnotation, p.Namespace, obj, policy.AnnotationChanges+": "+err.Error())
		} else {
			r.Changed++
			row.Changes = len(changes)
			a.changes.add(changes, p.Namespace, true)
		}
	}
	if a.nodesKnown && row.Build != "" {
		// Several builds when wincompat required node affinity: the pod may run on any of them.
		chosen := splitBuilds(row.Build)
		if p.Spec.NodeName != "" {
			row.NodeBuild = a.nodeBuild[p.Spec.NodeName]
			if row.NodeBuild != "" && !a.runsOn(&p.Spec, chosen, row.NodeBuild) {
				what := "build " + chosen[0]
				if len(chosen) > 1 {
					what = "builds " + strings.Join(chosen, ", ")
				}
				a.finding(BuildMismatch, p.Namespace, obj, fmt.Sprintf("chosen %s, but node %s runs %s", what, p.Spec.NodeName, row.NodeBuild))
			}
		} else if !slices.ContainsFunc(chosen, func(b string) bool { return a.readyBuild[b] }) {
			a.finding(PendingNoBuild, p.Namespace, obj, fmt.Sprintf("no ready node runs build %s", strings.Join(chosen, " or ")))
		}
	}
	a.imageFindings(p.Namespace, obj, &p.Spec, p.Annotations, changes)
	// A pod that has finished will not run again; its Job's template is judged instead.
	if a.report.Builds != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		a.checkBuilds(p.Namespace, obj, withoutDerivedPins(p), true)
	}
	if a.opts.Objects {
		a.report.Objects = append(a.report.Objects, row)
	}
}

// warnMode reports whether wincompat answers in warn mode in ns: objects there carry no record, and
// what enforce mode would change is worked out here instead.
func (a *auditor) warnMode(ns string) bool {
	n := a.namespaces[ns]
	if n == nil {
		return false
	}
	mode, _ := a.pol.ModeFor(policy.Namespace{Name: ns, Labels: n.Labels})
	return mode == policy.ModeWarn
}

// wouldChange decides on obj (a copy) as the webhook would on its creation, with the cluster's builds,
// taints and RuntimeClasses as the webhook's inventory reads them (without permission to read them, as
// wincompat mutate does offline), and reports what enforce mode would change.
func (a *auditor) wouldChange(ctx context.Context, ns, obj string, copied any) {
	n := a.namespaces[ns]
	facts := policy.Facts{Operation: policy.Create, Namespace: policy.Namespace{Name: ns, Labels: n.Labels, Annotations: n.Annotations},
		Version: "audit", Cluster: a.clusterFacts(ctx)}
	if a.opts.Images != nil {
		facts.Images = a.images // what the registries said, with --resolve-images
	}
	if facts.Cluster == nil && !a.warnFactsNoted {
		a.warnFactsNoted = true
		a.report.Notes = append(a.report.Notes, "warn mode: "+reason(a.clusterErr)+"; what enforce mode would change is worked out without the cluster's builds, taints and RuntimeClasses")
	}
	d, err := a.pol.Decide(copied, facts)
	if err != nil || !d.Handled() || d.Denied == "" && len(d.Changes) == 0 {
		return
	}
	a.row(ns).WouldChange++
	if d.Denied != "" {
		a.finding(WouldChange, ns, obj, "would be refused: "+d.Denied)
		return
	}
	var what []string
	for _, c := range d.Changes {
		if w := string(c.Action) + " " + c.Path; !slices.Contains(what, w) {
			what = append(what, w)
		}
	}
	a.finding(WouldChange, ns, obj, strings.Join(what, "; "))
}

// clusterFacts reads the cluster's facts once per run, as the webhook's inventory does; nil when they
// cannot be read (a.clusterErr says why), and each caller notes what it did without them.
func (a *auditor) clusterFacts(ctx context.Context) *policy.Cluster {
	if !a.clusterRead {
		a.clusterRead = true
		a.cluster, a.clusterErr = (&inventory.Inventory{Reader: a.c}).Cluster(ctx)
	}
	return a.cluster
}

// controlledByRead reports whether meta's controller is a workload this run read (a Deployment of a
// ReplicaSet, a CronJob of a Job): the findings on the controller's template cover meta, whose own
// template is an old revision or a copy of it.
func (a *auditor) controlledByRead(meta *metav1.ObjectMeta) bool {
	ref := metav1.GetControllerOfNoCopy(meta)
	if ref == nil || !auditedKind(ref) {
		return false
	}
	if !a.opts.Selector.Empty() {
		return a.ownersRead[ref.UID]
	}
	return a.kindsRead[ref.Kind+"/"] || a.kindsRead[ref.Kind+"/"+meta.Namespace]
}

// auditedKind reports whether ref names one of the workload kinds the audit reads.
func auditedKind(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(workloadLists, func(w workloadList) bool { return w.kind == ref.Kind && w.group == gv.Group })
}

// whyNotCovered explains a Windows pod without wincompat's marks.
func (a *auditor) whyNotCovered(p *corev1.Pod) string {
	ns := a.namespaces[p.Namespace]
	switch {
	case p.Labels[policy.LabelSkip] == "true":
		return "the pod is labelled " + policy.LabelSkip + "=true"
	case ns != nil && ns.Labels[policy.LabelEnabled] != "true":
		return "its namespace is not labelled " + policy.LabelEnabled + "=true"
	case p.Namespace == "kube-system":
		return "kube-system is never mutated"
	default:
		return "created while wincompat was not running, or before the namespace was labelled"
	}
}

func (a *auditor) template(ctx context.Context, kind string, t templateOf) {
	if a.warnMode(t.meta.Namespace) {
		a.wouldChange(ctx, t.meta.Namespace, kind+"/"+t.meta.Name, &corev1.PodTemplate{ObjectMeta: t.meta, Template: *t.tpl.DeepCopy()})
	}
	if !a.opts.Selector.Empty() {
		a.ownersRead[t.meta.UID] = true
	}
	windows := isWindows(&t.tpl.Spec)
	if !windows {
		a.linuxTemplate(ctx, kind, t)
	}
	s, recorded := t.tpl.Annotations[policy.AnnotationTemplateChanges]
	if !windows && !recorded {
		return
	}
	r := a.row(t.meta.Namespace)
	r.Workloads++
	obj := kind + "/" + t.meta.Name
	row := ObjectRow{Namespace: t.meta.Namespace, Kind: kind, Name: t.meta.Name, Covered: recorded}
	var changes []policy.Change
	if recorded {
		var err error
		changes, err = policy.DecodeChanges(s)
		if err != nil {
			a.finding(BadAnnotation, t.meta.Namespace, obj, policy.AnnotationTemplateChanges+": "+err.Error())
		} else {
			r.Templates++
			row.Changes = len(changes)
			a.changes.add(changes, t.meta.Namespace, false)
		}
	}
	spec := a.withClassPin(ctx, &t.tpl.Spec)
	a.imageFindings(t.meta.Namespace, obj, spec, t.tpl.Annotations, changes)
	if a.report.Builds != nil {
		a.checkBuilds(t.meta.Namespace, obj, spec, false)
	}
	if a.opts.Objects {
		a.report.Objects = append(a.report.Objects, row)
	}
}

func (a *auditor) finding(kind, ns, obj, detail string) {
	if a.perKind[kind] >= maxFindingsPerKind {
		if a.report.Truncated == nil {
			a.report.Truncated = map[string]int{}
		}
		a.report.Truncated[kind]++
		return
	}
	a.perKind[kind]++
	a.report.Findings = append(a.report.Findings, Finding{Kind: kind, Namespace: ns, Object: obj, Detail: detail})
}

// finish turns the accumulators into sorted rows and adds the namespace findings.
func (a *auditor) finish() {
	for _, ns := range sortedKeys(a.rows) {
		r := a.rows[ns]
		a.report.Namespaces = append(a.report.Namespaces, *r)
		if r.WindowsPods > 0 && !r.OptedIn && ns != "kube-system" && !a.labelsUnknown[ns] {
			a.finding(NamespaceUnlabeled, ns, "", fmt.Sprintf("%d Windows pods, but the namespace is not labelled %s=true", r.WindowsPods, policy.LabelEnabled))
		}
	}
	a.report.Changes = a.changes.rows()
	a.finishBuilds()
	a.finishTaints()
	slices.SortStableFunc(a.report.Findings, func(x, y Finding) int {
		return strings.Compare(x.Kind+"\x00"+x.Namespace+"\x00"+x.Object, y.Kind+"\x00"+y.Namespace+"\x00"+y.Object)
	})
	slices.SortStableFunc(a.report.Objects, func(x, y ObjectRow) int {
		return strings.Compare(x.Namespace+"\x00"+x.Kind+"\x00"+x.Name, y.Namespace+"\x00"+y.Kind+"\x00"+y.Name)
	})
	if a.report.Findings == nil {
		a.report.Findings = []Finding{}
	}
}

// reason is a short, one-line account of an API error.
func reason(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return strings.ToLower(string(status.Status().Reason)) + ": " + status.Status().Message
	}
	return err.Error()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
