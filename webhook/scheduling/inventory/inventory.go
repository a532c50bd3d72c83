// Package inventory turns the cluster's Nodes and RuntimeClasses, read from controller-runtime's
// informer cache, into the plain facts policy.Decide takes. The policy stays pure; this is the one place
// that knows how a Windows node is labelled.
package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// Inventory reads cluster facts from a cache-backed reader.
type Inventory struct {
	Reader client.Reader
}

// Cluster returns the Windows builds of ready nodes, the taints of all Windows nodes and the
// RuntimeClasses that exist. Taints are read from nodes not yet ready too: a pool that is joining (or
// recovering) is NotReady exactly while the pods meant for it are created, and a pod admitted without the
// pool's OS taint would stay Pending once the nodes are ready. The policy tolerates only OS taints of
// these, so reading more nodes never widens what a pod tolerates beyond them.
func (i *Inventory) Cluster(ctx context.Context) (*policy.Cluster, error) {
	// Read-only, on the admission path: skip the cache's deep copies, and copy only Windows nodes.
	var nodes corev1.NodeList
	if err := i.Reader.List(ctx, &nodes, client.UnsafeDisableDeepCopy,
		client.MatchingLabels{corev1.LabelOSStable: string(corev1.Windows)}); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var classes nodev1.RuntimeClassList
	if err := i.Reader.List(ctx, &classes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing RuntimeClasses: %w", err)
	}
	c := &policy.Cluster{RuntimeClasses: make(map[string]policy.RuntimeClass, len(classes.Items))}
	for _, n := range nodes.Items {
		build := n.Labels[corev1.LabelWindowsBuild]
		if build != "" && NodeReady(&n) {
			if !slices.Contains(c.Builds, build) {
				c.Builds = append(c.Builds, build)
			}
			if r, ok := NodeRevision(&n); ok {
				if c.Revisions == nil {
					c.Revisions = map[string]int{}
				}
				if prev, seen := c.Revisions[build]; !seen || r > prev {
					c.Revisions[build] = r
				}
			}
		}
		for _, t := range n.Spec.Taints {
			if !slices.ContainsFunc(c.WindowsTaints, func(o corev1.Taint) bool { return o.MatchTaint(&t) && o.Value == t.Value }) {
				c.WindowsTaints = append(c.WindowsTaints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
			}
		}
	}
	slices.Sort(c.Builds)
	slices.SortFunc(c.WindowsTaints, func(a, b corev1.Taint) int { return strings.Compare(a.ToString(), b.ToString()) })
	for _, rc := range classes.Items {
		class := policy.RuntimeClass{Handler: rc.Handler}
		if rc.Scheduling != nil {
			class.NodeSelector, class.Tolerations = rc.Scheduling.NodeSelector, rc.Scheduling.Tolerations
		}
		if rc.Overhead != nil {
			class.Overhead = rc.Overhead.PodFixed
		}
		c.RuntimeClasses[rc.Name] = class
	}
	return c, nil
}

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

// CacheOptions keep only what the inventory reads of Nodes (labels, taints, conditions, the kernel
// version): a large cluster's node status (images, volumes) would otherwise sit in every replica's memory.
func CacheOptions() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Node{}: {Transform: func(obj any) (any, error) {
			if n, ok := obj.(*corev1.Node); ok {
				n.ManagedFields = nil
				n.Status = corev1.NodeStatus{Conditions: n.Status.Conditions,
					NodeInfo: corev1.NodeSystemInfo{KernelVersion: n.Status.NodeInfo.KernelVersion}}
			}
			return obj, nil
		}},
	}
}
