package policy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// BuildCheck says which of some node builds could run a pod, and why the others could not.
type BuildCheck struct {
	// Runnable are the builds, of those asked about, that the pod's own pins and its images allow.
	Runnable []string
	// Reasons explain the builds excluded: a pin of the pod's, an image that cannot run there, or an
	// image with no Windows entry at all. Empty when every build asked about can run the pod.
	Reasons []string
}

// CheckBuilds answers "could this pod run on a Windows node of one of builds?" from its nodeSelector, its
// required node affinity and what registries say of its images (tags where images has no answer). It is
// the question `wincompat audit --builds` asks of every Windows pod and template when planning a
// migration (2019 → 2022 → 2025). It changes nothing.
func (p *Policy) CheckBuilds(spec *corev1.PodSpec, images map[string]Image, builds []string) BuildCheck {
	var check BuildCheck
	allowedByPins := PinnedBuilds(spec)
	containers := p.containerImages(spec, Facts{Images: images})
	for _, b := range builds {
		if allowedByPins != nil && !slices.Contains(allowedByPins, b) {
			continue
		}
		if !p.runsAll(containers, b) {
			continue
		}
		check.Runnable = append(check.Runnable, b)
	}
	if len(check.Runnable) == len(builds) {
		return check
	}
	if allowedByPins != nil {
		excluded := slices.DeleteFunc(slices.Clone(builds), func(b string) bool { return slices.Contains(allowedByPins, b) })
		switch {
		case len(allowedByPins) == 0:
			check.Reasons = append(check.Reasons, "its nodeSelector and required node affinity allow no "+corev1.LabelWindowsBuild+" at all")
		case len(excluded) > 0:
			check.Reasons = append(check.Reasons, "pinned to Windows build "+strings.Join(allowedByPins, " or ")+" by "+corev1.LabelWindowsBuild)
		}
	}
	for _, ci := range containers {
		switch {
		case ci.linuxOnly():
			check.Reasons = append(check.Reasons, ci.owner()+": image "+ci.describe()+" has no Windows entry")
		case ci.constrains():
			var cannot []string
			for _, b := range builds {
				if !p.runs(ci, b) {
					cannot = append(cannot, b)
				}
			}
			if len(cannot) > 0 {
				check.Reasons = append(check.Reasons, ci.owner()+": image "+ci.describe()+" cannot run on "+strings.Join(cannot, ", "))
			}
		}
	}
	return check
}

// PinnedBuilds is the set of Windows builds the pod's nodeSelector and required node affinity allow, or
// nil when they do not limit it; empty (not nil) when they allow none. Terms are alternatives: a term that
// says nothing of the build allows all.
func PinnedBuilds(spec *corev1.PodSpec) []string {
	var pinned []string
	if v, ok := spec.NodeSelector[corev1.LabelWindowsBuild]; ok {
		pinned = []string{v}
	}
	terms := requiredTerms(spec)
	if len(terms) == 0 {
		return pinned
	}
	union := []string{} // every term limits the build, or the loop returns: not nil from here on
	for _, t := range terms {
		var term []string
		limited := false
		for _, e := range t.MatchExpressions {
			if e.Key != corev1.LabelWindowsBuild || e.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if limited {
				term = slices.DeleteFunc(term, func(v string) bool { return !slices.Contains(e.Values, v) })
			} else {
				term, limited = slices.Clone(e.Values), true
			}
		}
		if !limited {
			return pinned // this alternative allows every build
		}
		for _, v := range term {
			if !slices.Contains(union, v) {
				union = append(union, v)
			}
		}
	}
	if pinned != nil {
		return slices.DeleteFunc(union, func(v string) bool { return !slices.Contains(pinned, v) })
	}
	return union
}
