package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// BuildRow is one Windows build of the cluster or the catalog, for `wincompat nodes`.
type BuildRow struct {
	Build        string
	Names        []string // catalog names, e.g. ltsc2022
	Nodes, Ready int
	Archs        []string
	Taints       []NodeTaint // the distinct taints of its nodes
	RuntimeClass string      // the catalog's class for the build
	ClassState   string      // "managed", "unmanaged", "missing" or "-" (no class in the catalog)
}

// NodeTaint is a taint of a build's nodes, and whether Windows pods get a toleration for it.
type NodeTaint struct {
	Taint     string `json:"taint"`
	Tolerated bool   `json:"tolerated"`
}

// String is the taint as `wincompat nodes` prints it: "(tolerated)" after one Windows pods tolerate.
func (t NodeTaint) String() string {
	if t.Tolerated {
		return t.Taint + " (tolerated)"
	}
	return t.Taint
}

// eachItem lists page by page (limit and continue, client-go's pager) and calls f with each item, so
// that only a page is held at a time whatever the size of the cluster; f must not keep the item.
func eachItem[L client.ObjectList](ctx context.Context, c client.Reader, newList func() L, f func(runtime.Object) error) error {
	pg := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		l := newList()
		err := c.List(ctx, l, client.Limit(opts.Limit), client.Continue(opts.Continue))
		return l, err
	})
	// One page read ahead while one is summarised, not the default ten.
	pg.PageBufferSize = 1
	return pg.EachListItem(ctx, metav1.ListOptions{}, f)
}

// Report summarises the cluster's Windows nodes and RuntimeClasses against the policy, with the
// problems a platform engineer would want flagged. Nodes are read page by page and summarised as they
// come: memory grows with the builds and the nodes that need attention, not with the nodes.
func Report(ctx context.Context, c client.Reader, p *policy.Policy) ([]BuildRow, []string, error) {
	rows := map[string]*BuildRow{}
	row := func(build string) *BuildRow {
		if r, ok := rows[build]; ok {
			return r
		}
		r := &BuildRow{Build: build, ClassState: "-"}
		for _, b := range p.Builds {
			if b.Number == build {
				r.Names, r.RuntimeClass = b.Names, b.RuntimeClass
			}
		}
		rows[build] = r
		return r
	}
	for _, b := range p.Builds {
		row(b.Number)
	}
	var findings []string
	err := eachItem(ctx, c, func() *corev1.NodeList { return &corev1.NodeList{} }, func(o runtime.Object) error {
		n := o.(*corev1.Node)
		if n.Labels[corev1.LabelOSStable] != string(corev1.Windows) {
			return nil
		}
		build := n.Labels[corev1.LabelWindowsBuild]
		if build == "" {
			findings = append(findings, fmt.Sprintf("node %s is Windows but has no %s label: wincompat cannot match its build", n.Name, corev1.LabelWindowsBuild))
			return nil
		}
		r := row(build)
		r.Nodes++
		if NodeReady(n) {
			r.Ready++
		}
		if arch := n.Labels[corev1.LabelArchStable]; arch != "" && !slices.Contains(r.Archs, arch) {
			r.Archs = append(r.Archs, arch)
		}
		osTainted := false
		for _, t := range n.Spec.Taints {
			nt := NodeTaint{Taint: t.ToString(), Tolerated: p.WindowsPodsTolerate(t)}
			if nt.Tolerated {
				osTainted = osTainted || t.Effect != corev1.TaintEffectPreferNoSchedule
			}
			if !slices.Contains(r.Taints, nt) {
				r.Taints = append(r.Taints, nt)
			}
		}
		if !osTainted {
			findings = append(findings, fmt.Sprintf("node %s is Windows but has no operating-system taint (%s=windows): pods that choose no operating system may be scheduled onto it; label their namespaces %s=linux, or set linuxByDefault", n.Name, strings.Join(policy.OSTaintKeys(), "|"), policy.LabelDefaultOS))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	// Whether each class is wincompat's, by name: all the rows read of it.
	managed := map[string]bool{}
	err = eachItem(ctx, c, func() *nodev1.RuntimeClassList { return &nodev1.RuntimeClassList{} }, func(o runtime.Object) error {
		rc := o.(*nodev1.RuntimeClass)
		managed[rc.Name] = rc.Labels["app.kubernetes.io/managed-by"] == "wincompat"
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing RuntimeClasses: %w", err)
	}
	var out []BuildRow
	for _, build := range sortedBuilds(rows) {
		r := rows[build]
		if r.RuntimeClass != "" {
			ours, ok := managed[r.RuntimeClass]
			switch {
			case !ok:
				r.ClassState = "missing"
				if r.Nodes > 0 {
					findings = append(findings, fmt.Sprintf("build %s has nodes but no RuntimeClass %s: pods get no runtimeClassName", build, r.RuntimeClass))
				}
			case ours:
				r.ClassState = "managed"
			default:
				r.ClassState = "unmanaged"
			}
			if ok && r.Nodes == 0 {
				findings = append(findings, fmt.Sprintf("RuntimeClass %s is for build %s, which has no node: its pods stay Pending", r.RuntimeClass, build))
			}
		}
		slices.SortFunc(r.Taints, func(a, b NodeTaint) int { return strings.Compare(a.String(), b.String()) })
		slices.Sort(r.Archs)
		out = append(out, *r)
	}
	return out, findings, nil
}

func sortedBuilds(rows map[string]*BuildRow) []string {
	var builds []string
	for b := range rows {
		builds = append(builds, b)
	}
	slices.Sort(builds)
	return builds
}
