package audit

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// clock is the time gated pods' ages are taken at; tests fix it.
var clock = time.Now

// gatedPods reports the pods that wait behind wincompat's scheduling gate (policy.SchedulingGate): how
// long, why, and whether past the bound at which the leader removes the gate whatever the registry
// says. A pod held only by someone else's gate is none of wincompat's business. It keeps nothing per
// pod.
type gatedPods struct {
	bound time.Duration
	// boundSaid says where bound comes from, for the finding's detail.
	boundSaid string
	now       func() time.Time
	out       *sink
}

func newGatedPods(bound time.Duration, out *sink) *gatedPods {
	said := "the --gate-timeout given"
	if bound <= 0 {
		bound, said = policy.DefaultGateTimeout, "wincompat serve's default --gate-timeout; the audit cannot read the one the cluster runs with"
	}
	return &gatedPods{bound: bound, boundSaid: said, now: clock, out: out}
}

// pod reports p when it carries wincompat's gate.
func (g *gatedPods) pod(p *corev1.Pod, obj string) {
	if !policy.Gated(p) {
		return
	}
	age, known := time.Duration(0), !p.CreationTimestamp.IsZero()
	if known {
		age = max(g.now().Sub(p.CreationTimestamp.Time), 0).Round(time.Second)
	}
	bound := fmt.Sprintf("%s, %s", g.bound, g.boundSaid)
	var detail string
	switch {
	case !known:
		detail = fmt.Sprintf("gated since an unknown time (no creationTimestamp; the bound is %s): %s", bound, gateReason(p))
	case age > g.bound:
		detail = fmt.Sprintf("gated for %s, past the bound (%s): %s. The leader removes the gate at the bound, so it cannot: "+
			"check the log of the replica holding the Lease wincompat.io, and whether the pod's registries answer from it; "+
			"`kubectl wincompat ungate -n %s` releases the namespace's gated pods without a build decision",
			age, bound, gateReason(p), p.Namespace)
	default:
		detail = fmt.Sprintf("gated for %s, within the bound (%s): %s", age, bound, gateReason(p))
	}
	g.out.finding(GatedPod, p.Namespace, obj, detail)
}

// gateReason is why the pod was gated, as its record says: the gate's entry, which the webhook writes.
// The admission policies (hybrid engine, no replica answering) gate without recording.
func gateReason(p *corev1.Pod) string {
	if record, ok := p.Annotations[policy.AnnotationChanges]; ok {
		if changes, err := policy.DecodeChanges(record); err == nil {
			for _, c := range changes {
				if c.Rule == policy.RuleBuildGate && c.Action == policy.Inject && c.Reason != "" {
					return c.Reason
				}
			}
		}
	}
	_, byPolicy := p.Annotations[policy.AnnotationAdmissionPolicy]
	if _, decided := p.Annotations[policy.AnnotationVersion]; byPolicy && !decided {
		return "admitted by wincompat's admission policies while no webhook replica answered: the leader decides its build"
	}
	return "no entry of the gate in its record (" + policy.AnnotationChanges + "): the gate was not added by wincompat's webhook; the leader decides its build"
}
