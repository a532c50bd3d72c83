package audit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/misplaced"
)

// misplacedPods finds Windows pods the runtime refused for their OS or build. The kubelet's Events are read
// before the pods (Warnings about pods only, by field selector), and only those that match a row are
// kept, by pod UID: memory grows with the misplaced pods, not with the Events.
type misplacedPods struct {
	pol    *policy.Policy
	nodes  *nodes
	out    *sink
	events map[types.UID]misplaced.PodFailure
}

func newMisplaced(pol *policy.Policy, n *nodes, out *sink) *misplacedPods {
	return &misplacedPods{pol: pol, nodes: n, out: out, events: map[types.UID]misplaced.PodFailure{}}
}

// readEvents keeps the failures the kubelet's Events report; without permission, a note says that only
// container states were read.
func (m *misplacedPods) readEvents(ctx context.Context, pg *pager, namespaces []string) {
	visit := func(l client.ObjectList) {
		for _, e := range l.(*corev1.EventList).Items {
			if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != "Pod" {
				continue // listed without the field selector
			}
			if _, seen := m.events[e.InvolvedObject.UID]; seen {
				continue
			}
			if f, ok := misplaced.EventFailure(e.Reason, e.Message); ok {
				m.events[e.InvolvedObject.UID] = f
			}
		}
	}
	sel := client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{"type": corev1.EventTypeWarning, "involvedObject.kind": "Pod"})}
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		newList := func() client.ObjectList { return &corev1.EventList{} }
		err := pg.list(ctx, ns, newList, nil, visit, sel)
		if err != nil && !apierrors.IsForbidden(err) {
			// A reader that cannot select by field (a cache, a proxy) lists them all; the type and kind
			// are checked above either way.
			err = pg.list(ctx, ns, newList, nil, visit)
		}
		if err != nil {
			m.out.note("events: " + reason(err) + "; misplaced pods found from their container states only")
			return
		}
	}
}

// pod reports p when it failed for one of the table's reasons (corroborated where the row asks).
func (m *misplacedPods) pod(p *corev1.Pod, obj string) {
	if p.Spec.NodeName == "" {
		return
	}
	f, ok := misplaced.PodStatusFailure(p)
	if !ok {
		if f, ok = m.events[p.UID]; !ok {
			return
		}
	}
	nodeBuild := m.nodes.build[p.Spec.NodeName]
	pl := misplaced.PlacementOf(m.pol, p, nodeBuild, m.nodes.readyWindowsBuilds())
	if !misplaced.Corroborated(f, pl) {
		return
	}
	detail := misplaced.Explain(f, p.Spec.NodeName, nodeBuild, pl)
	if why := misplaced.RemediationBlock(p); why != "" {
		detail += "; not for remediation: " + why
	}
	m.out.finding(Misplaced, p.Namespace, obj, detail)
}
