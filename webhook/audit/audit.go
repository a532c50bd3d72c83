// Package audit reads what wincompat recorded on Pods and workload templates, page by page so that it
// works on clusters with a hundred thousand pods, and reports it per namespace, per change and per
// object, with findings about coverage and placement. Each concern (coverage, warn mode, builds,
// images, the migration plan, the namespace summary, the Linux side, taints, the Windows pods' volumes
// and Services, the recorded run-time readiness warnings, the pods behind wincompat's scheduling gate) is one type in its own file that owns its state; the auditor here only reads and hands objects to them (README.md, "Code
// layout").
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
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
	// ObjectsOnDisk keeps those rows in a temporary file instead of Report.Objects, sorted in runs that
	// WriteJSON merges as it writes, so that memory stays bounded with them too; the other renderings
	// read them back. Report.Close removes the file. Where no file can be made, they stay in memory
	// and a note says so.
	ObjectsOnDisk bool
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
	// GateTimeout is the bound of the cluster's `wincompat serve --gate-timeout`, against which gated
	// pods are judged; 0 is its default, policy.DefaultGateTimeout.
	GateTimeout time.Duration
}

// auditor reads the cluster page by page and hands each object to the concerns that judge it, each in
// its own file with its own state; what they report meets in one sink, in the order reported.
type auditor struct {
	opts       Options
	pol        *policy.Policy
	pager      *pager
	out        *sink
	namespaces *namespaces
	nodes      *nodes
	owners     *controllers
	summary    *namespaceSummary
	coverage   *coverage
	warn       *warnMode
	images     *imageFacts
	builds     *builds
	classPins  *classPins
	migration  *migration
	linux      *linuxSide
	taints     *windowsTaints
	storage    *storage
	services   *services
	readiness  *readiness
	misplaced  *misplacedPods
	gated      *gatedPods
	objects    objectRows
}

func newAuditor(c client.Reader, opts Options) *auditor {
	pol := opts.Policy
	if pol == nil {
		pol = policy.Default()
	}
	out := newSink()
	ns, nodes, cluster := newNamespaces(), newNodes(), &clusterFacts{reader: c}
	isolation := &hyperV{cluster: cluster}
	owners := newControllers(opts.Selector)
	imgs := newImageFacts(opts.Images, pol, out)
	pg := &pager{c: c, pageSize: opts.PageSize, progress: opts.Progress, start: time.Now()}
	return &auditor{
		opts: opts, pol: pol, out: out, namespaces: ns, nodes: nodes, owners: owners,
		pager:     pg,
		summary:   newNamespaceSummary(pol, ns, out),
		coverage:  &coverage{pol: pol, namespaces: ns, out: out},
		warn:      &warnMode{pol: pol, namespaces: ns, cluster: cluster, images: imgs, out: out},
		images:    imgs,
		builds:    &builds{pol: pol, nodes: nodes, images: imgs, hyperV: isolation, out: out},
		classPins: newClassPins(c, out),
		migration: newMigration(pol, imgs, isolation, out, opts.Builds),
		linux:     &linuxSide{pol: pol, nodes: nodes, cluster: cluster, controllers: owners, out: out},
		taints:    &windowsTaints{pol: pol, nodes: nodes, out: out},
		storage:   newStorage(pg, nodes, out),
		services:  newServices(pg, nodes, out),
		readiness: newReadiness(owners, out),
		misplaced: newMisplaced(pol, nodes, out),
		gated:     newGatedPods(opts.GateTimeout, out),
		objects:   objectRows{keep: opts.Objects},
	}
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
	a := newAuditor(c, opts)
	if opts.Objects && opts.ObjectsOnDisk {
		spool, err := newObjectSpool()
		if err != nil {
			a.out.note("the objects' rows are kept in memory: " + err.Error())
		}
		a.objects.onDisk = spool
	}
	rep, err := a.run(ctx)
	if err != nil && a.objects.onDisk != nil {
		err = errors.Join(err, a.objects.onDisk.close())
	}
	return rep, err
}

func (a *auditor) run(ctx context.Context) (*Report, error) {
	if err := a.namespaces.read(ctx, a.pager, a.opts.Namespaces, a.out); err != nil {
		return nil, err
	}
	a.readNodes(ctx)
	a.misplaced.readEvents(ctx, a.pager, a.opts.Namespaces)
	if err := a.readPods(ctx); err != nil {
		return nil, err
	}
	a.readWorkloads(ctx)
	// What the Windows pods' claims and Services need, read only now that the pods say what that is.
	a.storage.judge(ctx)
	a.services.judge(ctx)
	rep := a.finish()
	a.pager.done()
	return rep, nil
}

// readNodes learns each node's Windows build; without permission, build findings are skipped.
func (a *auditor) readNodes(ctx context.Context) {
	err := a.pager.list(ctx, "", func() client.ObjectList { return &corev1.NodeList{} }, nil, func(l client.ObjectList) {
		items := l.(*corev1.NodeList).Items
		for i := range items {
			a.nodes.add(&items[i])
		}
	})
	if err != nil {
		a.out.notRead("nodes: " + reason(err) + "; build findings skipped")
		return
	}
	a.nodes.known = true
}

// readPods lists pods cluster-wide when it may, else namespace by namespace, keeping what it can read.
func (a *auditor) readPods(ctx context.Context) error {
	newList := func() client.ObjectList { return &corev1.PodList{} }
	visit := func(l client.ObjectList) {
		pods := l.(*corev1.PodList).Items
		var specs []*corev1.PodSpec
		for i := range pods {
			if a.coverage.windowsPod(&pods[i]) {
				specs = append(specs, &pods[i].Spec)
			}
		}
		a.images.resolve(ctx, specs)
		for i := range pods {
			a.pod(ctx, &pods[i])
		}
	}
	if len(a.opts.Namespaces) == 0 {
		err := a.pager.list(ctx, "", newList, a.opts.Selector, visit)
		if err == nil {
			return nil
		}
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("listing pods: %w", err)
		}
		a.out.note("pods in all namespaces: " + reason(err) + "; read namespace by namespace instead")
	}
	for _, ns := range a.namespaces.names() {
		if err := a.pager.list(ctx, ns, newList, a.opts.Selector, visit); err != nil {
			if apierrors.IsForbidden(err) {
				a.out.notRead(fmt.Sprintf("pods in %s: %s", ns, reason(err)))
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
		scopes = a.namespaces.names()
	}
	for _, w := range workloadLists {
		for _, ns := range scopes {
			err := a.pager.list(ctx, ns, w.list, a.opts.Selector, func(l client.ObjectList) {
				tpls := w.tpl(l)
				var specs []*corev1.PodSpec
				for i := range tpls {
					if _, recorded := tpls[i].tpl.Annotations[policy.AnnotationTemplateChanges]; recorded || a.coverage.isWindows(&tpls[i].tpl.Spec, tpls[i].meta.Namespace) {
						specs = append(specs, &tpls[i].tpl.Spec)
					}
				}
				a.images.resolve(ctx, specs)
				for _, t := range tpls {
					a.template(ctx, w.kind, t)
				}
			})
			if err == nil {
				a.owners.listed(w.kind, ns)
			} else {
				where := "all namespaces"
				if ns != "" {
					where = ns
				}
				a.out.notRead(fmt.Sprintf("%s in %s: %s", w.kind, where, reason(err)))
			}
		}
	}
}

// pod hands a pod to each concern, in the order their findings and notes have always been reported.
func (a *auditor) pod(ctx context.Context, p *corev1.Pod) {
	obj := "Pod/" + p.Name
	// Any pod with wincompat's gate: the leader releases one that is not Windows (any more).
	a.gated.pod(p, obj)
	warnMode := a.warn.in(p.Namespace)
	if warnMode && a.warn.wouldChange(ctx, p.Namespace, obj, p.DeepCopy()) {
		a.summary.wouldChange(p.Namespace)
	}
	if !a.coverage.windowsPod(p) {
		a.linux.pod(ctx, p)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref == nil || ref.Kind != "DaemonSet" {
		// A daemon pod tolerates whatever its node carries; it says nothing of where workloads can go.
		a.taints.pod(&p.Spec)
	}
	_, recorded := p.Annotations[policy.AnnotationVersion]
	row := ObjectRow{Namespace: p.Namespace, Kind: "Pod", Name: p.Name, Covered: recorded, Node: p.Spec.NodeName}
	if source := p.Annotations[policy.AnnotationBuildSource]; recorded && source != "" {
		// Only wincompat's own decision: a user's wincompat.io/build on a pod wincompat never saw is a
		// request ("ltsc2022"), not a build number.
		row.Build, row.BuildSource = p.Annotations[policy.AnnotationBuild], source
	}
	a.summary.windowsPod(p.Namespace, a.coverage.pod(p, obj, warnMode))
	var changes []policy.Change
	if record, ok := p.Annotations[policy.AnnotationChanges]; ok {
		changes = a.summary.recorded(p.Namespace, obj, policy.AnnotationChanges, record, true)
		row.Changes = len(changes)
	}
	row.NodeBuild = a.builds.pod(ctx, p, obj, row.Build)
	a.misplaced.pod(p, obj)
	a.imageFindings(ctx, p.Namespace, obj, &p.Spec, p.Annotations, changes)
	a.readiness.pod(p, obj, changes)
	// A pod that has finished will not run again; its Job's template is judged instead.
	if a.migration.asked() && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		a.migration.check(ctx, p.Namespace, obj, withoutDerivedPins(p), true)
	}
	a.storage.pod(p)
	a.services.pod(ctx, p)
	a.objects.add(row)
}

// template hands a workload's pod template to each concern, as pod does.
func (a *auditor) template(ctx context.Context, kind string, t templateOf) {
	ns, obj := t.meta.Namespace, kind+"/"+t.meta.Name
	if a.warn.in(ns) && a.warn.wouldChange(ctx, ns, obj, &corev1.PodTemplate{ObjectMeta: t.meta, Template: *t.tpl.DeepCopy()}) {
		a.summary.wouldChange(ns)
	}
	a.owners.saw(&t.meta)
	windows := a.coverage.isWindows(&t.tpl.Spec, ns)
	if !windows {
		a.linux.template(ctx, kind, t)
	}
	record, recorded := t.tpl.Annotations[policy.AnnotationTemplateChanges]
	if !windows && !recorded {
		return
	}
	a.summary.workload(ns)
	row := ObjectRow{Namespace: ns, Kind: kind, Name: t.meta.Name, Covered: recorded}
	var changes []policy.Change
	if recorded {
		changes = a.summary.recorded(ns, obj, policy.AnnotationTemplateChanges, record, false)
		row.Changes = len(changes)
	}
	spec := a.classPins.withClassPin(ctx, &t.tpl.Spec)
	a.imageFindings(ctx, ns, obj, spec, t.tpl.Annotations, changes)
	a.readiness.template(&t.meta, obj, changes)
	if a.migration.asked() {
		a.migration.check(ctx, ns, obj, spec, false)
	}
	a.objects.add(row)
}

// imageFindings: an image with no Windows entry is the root cause, as such an object runs on no Windows
// build whatever it is pinned to; only without one do its pins count against its images.
func (a *auditor) imageFindings(ctx context.Context, ns, obj string, spec *corev1.PodSpec, annotations map[string]string, changes []policy.Change) {
	if !a.images.linuxOnly(ns, obj, spec, changes) {
		a.builds.notInImage(ctx, ns, obj, spec, annotations)
	}
}

// finish asks each concern for its part of the report; the findings they report on finishing
// (unlabelled namespaces, opt-in mistakes, untolerated taints) come last, as they need every object read.
func (a *auditor) finish() *Report {
	rep := &Report{}
	rep.Namespaces, rep.Changes = a.summary.finish()
	reportOptInMistakes(a.pol, a.namespaces, a.out)
	a.images.finish()
	rep.Builds = a.migration.finish()
	a.taints.finish()
	a.readiness.finish()
	rep.Objects, rep.onDisk = a.objects.sorted(), a.objects.onDisk
	a.out.fill(rep)
	return rep
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
