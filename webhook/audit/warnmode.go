package audit

import (
	"context"
	"slices"
	"strings"

	"github.com/wincompat/wincompat/policy"
)

// warnMode works out, for the objects of namespaces in warn mode, what enforce mode would change: warn
// mode's objects carry no record, so the audit decides on them itself, as the webhook would.
type warnMode struct {
	pol        *policy.Policy
	namespaces *namespaces
	cluster    *clusterFacts
	images     *imageFacts
	out        *sink
	// factsNoted: the note that the cluster's facts could not be read is given once.
	factsNoted bool
}

// in reports whether wincompat answers in warn mode in ns: objects there carry no record, and what
// enforce mode would change is worked out here instead.
func (w *warnMode) in(ns string) bool {
	if !w.namespaces.known(ns) {
		return false
	}
	mode, _ := w.pol.ModeFor(w.namespaces.facts(ns))
	return mode == policy.ModeWarn
}

// wouldChange decides on obj (a copy) as the webhook would on its creation, with the cluster's builds,
// taints and RuntimeClasses as the webhook's inventory reads them (without permission to read them, as
// wincompat mutate does offline), reports what enforce mode would change, and says whether it would.
func (w *warnMode) wouldChange(ctx context.Context, ns, obj string, copied any) bool {
	facts := policy.Facts{Operation: policy.Create, Namespace: w.namespaces.facts(ns), Version: "audit", Cluster: w.cluster.get(ctx)}
	if w.images.resolving() {
		facts.Images = w.images.answers // what the registries said, with --resolve-images
	}
	if facts.Cluster == nil && !w.factsNoted {
		w.factsNoted = true
		w.out.note("warn mode: " + w.cluster.why() + "; what enforce mode would change is worked out without the cluster's builds, taints and RuntimeClasses")
	}
	d, err := w.pol.Decide(copied, facts)
	if err != nil || !d.Handled() || d.Denied == "" && !changesSomething(d.Changes) {
		return false
	}
	if d.Denied != "" {
		w.out.finding(WouldChange, ns, obj, "would be refused: "+d.Denied)
		return true
	}
	var what []string
	for _, c := range d.Changes {
		if change := string(c.Action) + " " + c.Path; !slices.Contains(what, change) {
			what = append(what, change)
		}
	}
	w.out.finding(WouldChange, ns, obj, strings.Join(what, "; "))
	return true
}

// changesSomething reports whether enforce mode would change the object, not only warn of it. An object
// enforce mode rewrote before its namespace moved to warn mode decides again to its readiness warnings
// alone: they are the run-time findings of its record, and nothing is left that enforce would change.
// Beside a change, the warnings stay in the finding's detail: warn mode's objects carry no record.
func changesSomething(changes []policy.Change) bool {
	return slices.ContainsFunc(changes, func(c policy.Change) bool { return c.Action != policy.Warn })
}
