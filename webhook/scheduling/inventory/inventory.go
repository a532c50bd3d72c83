// Package inventory turns the cluster's Windows Nodes and RuntimeClasses into the plain facts
// policy.Decide takes. The policy stays pure; this is the one place that knows how a Windows node is
// labelled.
//
// The facts are kept as the informers report changes and read by each review in O(1): a review costs
// the same on 100 nodes as on 5,000. Only a change of what a review reads (a Windows node's build,
// readiness, revision or OS taints; a RuntimeClass) makes the next read recompute them, once; a node's
// heartbeat changes none of it.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// Inventory keeps the facts of Windows nodes and RuntimeClasses. The zero value is empty; Watch fills it.
type Inventory struct {
	mu      sync.Mutex
	nodes   map[string]NodeFacts
	classes map[string]policy.RuntimeClass
	stale   atomic.Bool
	current atomic.Pointer[Snapshot]
	synced  []toolscache.ResourceEventHandlerRegistration
}

// Snapshot is the facts at one moment. It is shared by every reader: never change it.
type Snapshot struct {
	Cluster *policy.Cluster
	// Builds is the build label of every Windows node, ready or not, by node name.
	Builds map[string]string
	// ReadyBuilds is the build of every ready Windows node that has one, by node name.
	ReadyBuilds map[string]string
}

// NodeFacts is what wincompat reads of a Windows node.
type NodeFacts struct {
	Build    string
	Ready    bool
	Revision int // 0 when the node reports none for its build
	// OSTaints are the node's taints whose key is an operating-system taint key: the only taints the
	// policy tolerates from the cluster (policy.WindowsPodsTolerate). A cluster autoscaler's taint, whose
	// value differs on every node, would otherwise make every review walk one taint per node.
	OSTaints []corev1.Taint
}

// FactsOf reads n's facts.
func FactsOf(n *corev1.Node) NodeFacts {
	f := NodeFacts{Build: n.Labels[corev1.LabelWindowsBuild], Ready: NodeReady(n)}
	f.Revision, _ = NodeRevision(n)
	for _, t := range n.Spec.Taints {
		if slices.Contains(policy.OSTaintKeys(), t.Key) {
			f.OSTaints = append(f.OSTaints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	return f
}

// Equal reports whether f and o tell a review the same.
func (f NodeFacts) Equal(o NodeFacts) bool {
	return f.Build == o.Build && f.Ready == o.Ready && f.Revision == o.Revision && slices.Equal(f.OSTaints, o.OSTaints)
}

// FactsChanged reports whether an update of a node changes what wincompat reads of it, so that a
// controller can ignore the heartbeats of thousands of nodes.
func FactsChanged(old, updated *corev1.Node) bool {
	return isWindows(old) != isWindows(updated) || !FactsOf(old).Equal(FactsOf(updated))
}

func isWindows(n *corev1.Node) bool { return n.Labels[corev1.LabelOSStable] == string(corev1.Windows) }

// Watch keeps the inventory current from the informers of c, which must hold Nodes as CacheOptions
// selects them.
func (i *Inventory) Watch(ctx context.Context, c cache.Informers) error {
	i.init()
	nodes, err := c.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("informer for Nodes: %w", err)
	}
	classes, err := c.GetInformer(ctx, &nodev1.RuntimeClass{})
	if err != nil {
		return fmt.Errorf("informer for RuntimeClasses: %w", err)
	}
	r, err := nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { i.setNode(o) },
		UpdateFunc: func(_, o any) { i.setNode(o) },
		DeleteFunc: func(o any) { i.deleteNode(o) },
	})
	if err != nil {
		return err
	}
	i.synced = append(i.synced, r)
	if r, err = classes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { i.setClass(o) },
		UpdateFunc: func(_, o any) { i.setClass(o) },
		DeleteFunc: func(o any) { i.deleteClass(o) },
	}); err != nil {
		return err
	}
	i.synced = append(i.synced, r)
	return nil
}

// HasSynced reports whether every object the informers listed at start has been read: before that, a
// review would see too few nodes.
func (i *Inventory) HasSynced() bool {
	for _, r := range i.synced {
		if !r.HasSynced() {
			return false
		}
	}
	return len(i.synced) > 0
}

// ErrNotSynced: the inventory has not read the cluster yet.
var ErrNotSynced = errors.New("the node inventory has not synced yet")

// Cluster returns the Windows builds of ready nodes, the OS taints of all Windows nodes and the
// RuntimeClasses that exist. Taints are read from nodes not yet ready too: a pool that is joining (or
// recovering) is NotReady exactly while the pods meant for it are created, and a pod admitted without the
// pool's OS taint would stay Pending once the nodes are ready. The policy tolerates only OS taints of
// these, so reading more nodes never widens what a pod tolerates beyond them.
func (i *Inventory) Cluster(ctx context.Context) (*policy.Cluster, error) {
	// Only until the first sync, as a cached client's read would wait.
	if len(i.synced) > 0 && !i.HasSynced() && !toolscache.WaitForCacheSync(ctx.Done(), i.HasSynced) {
		return nil, ErrNotSynced
	}
	return i.Snapshot().Cluster, nil
}

// Snapshot returns the current facts, recomputing them first if something changed since the last read.
func (i *Inventory) Snapshot() *Snapshot {
	if s := i.current.Load(); s != nil && !i.stale.Load() {
		return s
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if s := i.current.Load(); s != nil && !i.stale.Load() {
		return s
	}
	// Cleared before reading, under the lock writers hold: a change made while this runs sets it again.
	i.stale.Store(false)
	s := snapshotOf(i.nodes, i.classes)
	i.current.Store(s)
	return s
}

func (i *Inventory) init() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.nodes == nil {
		i.nodes, i.classes = map[string]NodeFacts{}, map[string]policy.RuntimeClass{}
	}
}

func (i *Inventory) setNode(o any) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	if !isWindows(n) {
		i.forgetNode(n.Name)
		return
	}
	f := FactsOf(n)
	i.mu.Lock()
	defer i.mu.Unlock()
	if old, ok := i.nodes[n.Name]; ok && old.Equal(f) {
		return
	}
	i.nodes[n.Name] = f
	i.stale.Store(true)
}

func (i *Inventory) deleteNode(o any) {
	if n, ok := deleted(o).(*corev1.Node); ok {
		i.forgetNode(n.Name)
	}
}

func (i *Inventory) forgetNode(name string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.nodes[name]; ok {
		delete(i.nodes, name)
		i.stale.Store(true)
	}
}

func (i *Inventory) setClass(o any) {
	rc, ok := o.(*nodev1.RuntimeClass)
	if !ok {
		return
	}
	class := classOf(rc)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.classes[rc.Name] = class
	i.stale.Store(true)
}

func (i *Inventory) deleteClass(o any) {
	if rc, ok := deleted(o).(*nodev1.RuntimeClass); ok {
		i.mu.Lock()
		defer i.mu.Unlock()
		delete(i.classes, rc.Name)
		i.stale.Store(true)
	}
}

// deleted is the object a deletion is about, also when the informer missed it and knows only its last
// state.
func deleted(o any) any {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return o
}

func classOf(rc *nodev1.RuntimeClass) policy.RuntimeClass {
	class := policy.RuntimeClass{Handler: rc.Handler}
	if rc.Scheduling != nil {
		class.NodeSelector, class.Tolerations = rc.Scheduling.NodeSelector, rc.Scheduling.Tolerations
	}
	if rc.Overhead != nil {
		class.Overhead = rc.Overhead.PodFixed
	}
	return class
}

// snapshotOf computes the facts of these nodes and classes.
func snapshotOf(nodes map[string]NodeFacts, classes map[string]policy.RuntimeClass) *Snapshot {
	c := &policy.Cluster{RuntimeClasses: maps.Clone(classes)}
	if c.RuntimeClasses == nil {
		c.RuntimeClasses = map[string]policy.RuntimeClass{}
	}
	s := &Snapshot{Cluster: c, Builds: make(map[string]string, len(nodes)), ReadyBuilds: map[string]string{}}
	for name, n := range nodes {
		s.Builds[name] = n.Build
		if n.Build != "" && n.Ready {
			s.ReadyBuilds[name] = n.Build
			if !slices.Contains(c.Builds, n.Build) {
				c.Builds = append(c.Builds, n.Build)
			}
			if n.Revision > 0 {
				if c.Revisions == nil {
					c.Revisions = map[string]int{}
				}
				c.Revisions[n.Build] = max(c.Revisions[n.Build], n.Revision)
			}
		}
		for _, t := range n.OSTaints {
			if !slices.ContainsFunc(c.WindowsTaints, func(o corev1.Taint) bool { return o.MatchTaint(&t) && o.Value == t.Value }) {
				c.WindowsTaints = append(c.WindowsTaints, t)
			}
		}
	}
	slices.Sort(c.Builds)
	slices.SortFunc(c.WindowsTaints, func(a, b corev1.Taint) int { return strings.Compare(a.ToString(), b.ToString()) })
	return s
}

// ClusterOf reads the facts of the cluster r reads, listing Windows nodes a page at a time: for the
// audit, which has no informer.
func ClusterOf(ctx context.Context, r client.Reader) (*policy.Cluster, error) {
	facts := map[string]NodeFacts{}
	for cont := ""; ; {
		var nodes corev1.NodeList
		if err := r.List(ctx, &nodes, client.MatchingLabels{corev1.LabelOSStable: string(corev1.Windows)},
			client.Limit(pageSize), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		for i := range nodes.Items {
			facts[nodes.Items[i].Name] = FactsOf(&nodes.Items[i])
		}
		if cont = nodes.Continue; cont == "" {
			break
		}
	}
	var classes nodev1.RuntimeClassList
	if err := r.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing RuntimeClasses: %w", err)
	}
	byName := map[string]policy.RuntimeClass{}
	for i := range classes.Items {
		byName[classes.Items[i].Name] = classOf(&classes.Items[i])
	}
	return snapshotOf(facts, byName).Cluster, nil
}

// pageSize is the nodes one list call returns.
const pageSize = 500

// NodeRevision reads the revision a Windows node runs from status.nodeInfo.kernelVersion, which the
// kubelet fills on Windows with major.minor.build.UBR (kubernetes pkg/kubelet/winstats, GetOSInfo and
// GetPatchVersion): 10.0.20348.2762 → 2762. Only when its build is the node's windows-build label, so
// that a value written by something else is not trusted.
func NodeRevision(n *corev1.Node) (int, bool) {
	v := n.Status.NodeInfo.KernelVersion
	if policy.BuildOf(v) != n.Labels[corev1.LabelWindowsBuild] {
		return 0, false
	}
	return policy.Revision(v)
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// keptLabels are the node labels wincompat reads.
var keptLabels = []string{corev1.LabelOSStable, corev1.LabelWindowsBuild, corev1.LabelArchStable}

// CacheOptions keep Windows nodes only, and of them what the inventory reads (the labels above, taints,
// the Ready condition's status, the kernel version): Linux nodes are most of a large cluster, and a
// node's status (images, volumes) and annotations would otherwise sit in every replica's memory. A node
// relabelled away from Windows leaves the cache as a deletion.
func CacheOptions() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Node{}: {
			Label: labels.SelectorFromSet(labels.Set{corev1.LabelOSStable: string(corev1.Windows)}),
			Transform: func(obj any) (any, error) {
				if n, ok := obj.(*corev1.Node); ok {
					return keptNode(n), nil
				}
				return obj, nil
			},
		},
	}
}

func keptNode(n *corev1.Node) *corev1.Node {
	kept := &corev1.Node{}
	kept.Name, kept.UID, kept.ResourceVersion = n.Name, n.UID, n.ResourceVersion
	for _, k := range keptLabels {
		if v, ok := n.Labels[k]; ok {
			if kept.Labels == nil {
				kept.Labels = map[string]string{}
			}
			kept.Labels[k] = v
		}
	}
	kept.Spec.Taints = n.Spec.Taints
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			kept.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	kept.Status.NodeInfo.KernelVersion = n.Status.NodeInfo.KernelVersion
	return kept
}
