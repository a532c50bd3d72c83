package policy

import (
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// osTaintKeys are the keys platforms taint Windows nodes with to keep other pods off: GKE uses
// node.kubernetes.io/os, the Kubernetes Windows guides and Rancher use os, some clusters reuse the
// kubernetes.io/os label key. With the value windows (or Windows), such a taint is about the operating
// system alone, so a Windows pod may tolerate it; any other taint (a team's, unschedulable, not-ready)
// says something a Windows pod must not overrule.
var osTaintKeys = []string{"os", "node.kubernetes.io/os", corev1.LabelOSStable}

// osTaintValues are the values that name Windows in such a taint.
var osTaintValues = []string{"windows", "Windows"}

// OSTaintKeys lists the taint keys wincompat recognises on Windows nodes, for docs and reports.
func OSTaintKeys() []string { return slices.Clone(osTaintKeys) }

// WindowsPodsTolerate reports whether Windows pods get a toleration for taint t: one of the policy's
// windowsNodeTaints, or an operating-system taint (osTaintKeys with a Windows value), whatever its
// effect.
func (p *Policy) WindowsPodsTolerate(t corev1.Taint) bool {
	return osTaint(t) || p.configuredTaint(t)
}

func osTaint(t corev1.Taint) bool {
	return slices.Contains(osTaintKeys, t.Key) && slices.Contains(osTaintValues, t.Value)
}

// configuredTaint: t is one of the policy's windowsNodeTaints (key, value and effect).
func (p *Policy) configuredTaint(t corev1.Taint) bool {
	return slices.ContainsFunc(p.WindowsNodeTaints, func(c corev1.Taint) bool { return c.MatchTaint(&t) && c.Value == t.Value })
}

// tolerateWindowsTaints appends a toleration for each taint a Windows pod should tolerate and does not
// yet: the policy's windowsNodeTaints always, and in server mode the operating-system taints found on
// Windows nodes (ready or joining), so that GKE, AKS, EKS and Rancher conventions need no configuration. Existing
// tolerations are never edited or reordered.
func (p *Policy) tolerateWindowsTaints(spec *corev1.PodSpec, cluster *Cluster, rec *recorder) {
	type wanted struct {
		taint  corev1.Taint
		reason string
	}
	var taints []wanted
	for _, t := range p.WindowsNodeTaints {
		taints = append(taints, wanted{t, windowsTaintReason(t)})
	}
	if cluster != nil {
		for _, t := range cluster.WindowsTaints {
			if osTaint(t) && !p.configuredTaint(t) {
				taints = append(taints, wanted{t, "tolerates the taint " + t.ToString() + " found on Windows nodes"})
			}
		}
	}
	for _, w := range taints {
		tolerated := slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool {
			return t.ToleratesTaint(logr.Discard(), &w.taint, false)
		})
		if tolerated {
			continue
		}
		t := corev1.Toleration{Key: w.taint.Key, Operator: corev1.TolerationOpEqual, Value: w.taint.Value, Effect: w.taint.Effect}
		spec.Tolerations = append(spec.Tolerations, t)
		rec.add(Change{Action: Inject, Path: "spec.tolerations", To: jsonValue(t), Reason: w.reason, Rule: RuleWindowsTolerations})
	}
}

// windowsTaintReason is the reason recorded with the toleration of a taint of the policy's
// windowsNodeTaints; a record derives it from the toleration (record.go).
func windowsTaintReason(t corev1.Taint) string {
	return windowsTaintReasonPrefix + t.ToString()
}

const windowsTaintReasonPrefix = "tolerates the Windows node taint "
