package audit

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/truncate"
)

// ReadinessKindPrefix starts the kind of every run-time readiness finding: run-time-<rule>, one kind
// per row of the policy's readiness table (policy.ReadinessRules), so that a user filters by the rule
// and a widespread rule (memory-no-limit) cannot use up the per-kind bound of a rare one.
const ReadinessKindPrefix = "run-time-"

// ReadinessKind is the finding kind of a readiness rule.
func ReadinessKind(r policy.Rule) string { return ReadinessKindPrefix + string(r) }

// ReadinessKinds are the finding kinds of the readiness table, in its order.
func ReadinessKinds() []string {
	var kinds []string
	for _, r := range policy.ReadinessRules() {
		kinds = append(kinds, ReadinessKind(r))
	}
	return kinds
}

// maxShown bounds the recorded path and value a detail quotes (a record edited by hand may hold
// anything up to the annotations' 256 KiB): the record keeps them whole.
const maxShown = 200

// readiness turns the run-time readiness warnings admission recorded into findings: one per object and
// rule, with the first field and value and how many more, so that a pod of twenty containers without
// memory limits is one line. A pod a workload the audit reads controls is left to that workload's
// template when the template records the same rule, as the Linux side leaves ReplicaSets to their
// Deployment; otherwise (the template predates the rule, or was not read) its pods are reported, one
// finding per controller and rule naming the first pod.
type readiness struct {
	controllers *controllers
	out         *sink
	order       []policy.Rule
	// templateRules are the readiness rules the template of each workload that controls pending pods
	// records, by UID: what its pods are compared with once every workload is read. Pods are read first,
	// so only those workloads are kept.
	templateRules map[types.UID]map[policy.Rule]bool
	// pendingOwners are the UIDs of the controllers of pending pods.
	pendingOwners map[types.UID]bool
	// pending are the controlled pods' findings, one per controller and rule, in the order first seen;
	// bounded by the number of controllers, not of pods.
	pending []*pendingReadiness
	byKey   map[pendingKey]*pendingReadiness
}

// pendingKey names a controller by its UID and Kind/name, so that owner references without a UID
// (written by hand) are not lumped together.
type pendingKey struct {
	ns, owner string
	uid       types.UID
	rule      policy.Rule
}

type pendingReadiness struct {
	key      pendingKey
	firstPod string
	pods     int
	first    ruleSites
}

// ruleSites are one object's recorded warnings of one rule: the first, and how many.
type ruleSites struct {
	first policy.Change
	count int
}

func newReadiness(controllers *controllers, out *sink) *readiness {
	return &readiness{controllers: controllers, out: out, order: policy.ReadinessRules(),
		templateRules: map[types.UID]map[policy.Rule]bool{}, pendingOwners: map[types.UID]bool{}, byKey: map[pendingKey]*pendingReadiness{}}
}

// sites groups the recorded readiness warnings by rule, in the table's order. A change is classified
// by the rule code its record carries (policy.RuleOf), never by its reason's wording.
func (r *readiness) sites(changes []policy.Change) map[policy.Rule]*ruleSites {
	var by map[policy.Rule]*ruleSites
	for _, c := range changes {
		if c.Action != policy.Warn {
			continue
		}
		rule := policy.RuleOf(c)
		if !r.isReadiness(rule) {
			continue
		}
		if by == nil {
			by = map[policy.Rule]*ruleSites{}
		}
		if s := by[rule]; s != nil {
			s.count++
		} else {
			by[rule] = &ruleSites{first: c, count: 1}
		}
	}
	return by
}

func (r *readiness) isReadiness(rule policy.Rule) bool {
	for _, x := range r.order {
		if x == rule {
			return true
		}
	}
	return false
}

// pod reports a Windows pod's recorded readiness warnings, or keeps them for finish when a workload
// the audit reads controls it. A finished pod will not run again.
func (r *readiness) pod(p *corev1.Pod, obj string, changes []policy.Change) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	by := r.sites(changes)
	if by == nil {
		return
	}
	ref := metav1.GetControllerOfNoCopy(p)
	for _, rule := range r.order {
		s := by[rule]
		if s == nil {
			continue
		}
		if ref == nil || !auditedKind(ref) {
			r.out.finding(ReadinessKind(rule), p.Namespace, obj, s.detail(""))
			continue
		}
		key := pendingKey{p.Namespace, ref.Kind + "/" + ref.Name, ref.UID, rule}
		if pr := r.byKey[key]; pr != nil {
			pr.pods++
			continue
		}
		pr := &pendingReadiness{key: key, firstPod: obj, pods: 1, first: *s}
		r.byKey[key] = pr
		r.pendingOwners[ref.UID] = true
		r.pending = append(r.pending, pr)
	}
}

// template reports a workload template's recorded readiness warnings, unless a workload this run read
// controls it (a Deployment's ReplicaSet, a CronJob's Job): that one's template says it.
func (r *readiness) template(meta *metav1.ObjectMeta, obj string, changes []policy.Change) {
	by := r.sites(changes)
	if by == nil {
		return
	}
	if r.pendingOwners[meta.UID] {
		rules := make(map[policy.Rule]bool, len(by))
		for rule := range by {
			rules[rule] = true
		}
		r.templateRules[meta.UID] = rules
	}
	if r.controllers.controlledByRead(meta) {
		return
	}
	for _, rule := range r.order {
		if s := by[rule]; s != nil {
			r.out.finding(ReadinessKind(rule), meta.Namespace, obj, s.detail(""))
		}
	}
}

// finish reports the controlled pods whose controller's template, read this run, does not record the
// same rule.
func (r *readiness) finish() {
	for _, pr := range r.pending {
		if r.templateRules[pr.key.uid][pr.key.rule] {
			continue
		}
		r.out.finding(ReadinessKind(pr.key.rule), pr.key.ns, pr.firstPod, pr.first.detail(fmt.Sprintf(
			" in %s of %s, whose template was not read or records no such warning", plural(pr.pods, "pod"), pr.key.owner)))
	}
}

// detail names the first field and the value recorded there, how many more the object has, where
// else (for pods that stand for their controller), and the recorded reason (what fails, and what to do).
func (s *ruleSites) detail(where string) string {
	var b strings.Builder
	b.WriteString(shorten(s.first.Path))
	if len(s.first.From) > 0 {
		b.WriteString(" = ")
		b.WriteString(shorten(string(s.first.From)))
	}
	if s.count > 1 {
		fmt.Fprintf(&b, " (and %d more)", s.count-1)
	}
	b.WriteString(where)
	b.WriteString(": ")
	b.WriteString(s.first.Reason)
	return b.String()
}

// shorten cuts v to maxShown bytes, on a rune boundary.
func shorten(v string) string {
	if len(v) <= maxShown {
		return v
	}
	return truncate.AtRune(v, maxShown) + "..."
}
