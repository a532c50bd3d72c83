package audit

import (
	"fmt"

	"github.com/wincompat/wincompat/policy"
)

// namespaceSummary counts, per namespace, the Windows pods and workloads and what wincompat recorded on
// them, and the changes across the cluster; it reports the namespaces with Windows pods that are not
// labelled.
type namespaceSummary struct {
	pol        *policy.Policy
	namespaces *namespaces
	out        *sink
	rows       map[string]*NamespaceRow
	changes    changeTally
}

func newNamespaceSummary(pol *policy.Policy, ns *namespaces, out *sink) *namespaceSummary {
	return &namespaceSummary{pol: pol, namespaces: ns, out: out, rows: map[string]*NamespaceRow{}, changes: changeTally{}}
}

func (s *namespaceSummary) row(ns string) *NamespaceRow {
	r, ok := s.rows[ns]
	if !ok {
		r = &NamespaceRow{Namespace: ns, OptedIn: s.namespaces.facts(ns).Labels[policy.LabelEnabled] == "true"}
		s.rows[ns] = r
	}
	return r
}

// windowsPod counts a Windows pod, covered when wincompat recorded itself on it.
func (s *namespaceSummary) windowsPod(ns string, covered bool) {
	r := s.row(ns)
	r.WindowsPods++
	if covered {
		r.Covered++
	}
}

// workload counts a Windows workload, or one wincompat recorded its changes on.
func (s *namespaceSummary) workload(ns string) { s.row(ns).Workloads++ }

// wouldChange counts an object warn mode left as it came that enforce mode would change.
func (s *namespaceSummary) wouldChange(ns string) { s.row(ns).WouldChange++ }

// recorded reads an object's record of changes (the value of annotation key) and counts it; a record
// that does not parse is a finding, never fatal.
func (s *namespaceSummary) recorded(ns, obj, key, record string, pod bool) []policy.Change {
	changes, err := policy.DecodeChanges(record)
	if err != nil {
		s.out.finding(BadAnnotation, ns, obj, key+": "+err.Error())
		return nil
	}
	if pod {
		s.row(ns).Changed++
	} else {
		s.row(ns).Templates++
	}
	s.changes.add(changes, ns, pod)
	return changes
}

// finish returns the rows by namespace and reports the namespaces with Windows pods that are not
// labelled, unless their labels are unknown or the policy excludes them (labelling would change
// nothing there).
func (s *namespaceSummary) finish() ([]NamespaceRow, []ChangeRow) {
	var rows []NamespaceRow
	for _, ns := range sortedKeys(s.rows) {
		r := s.rows[ns]
		rows = append(rows, *r)
		excluded := s.pol.Scope(nil, policy.Namespace{Name: ns}) == policy.ExcludedNamespace
		if r.WindowsPods > 0 && !r.OptedIn && !excluded && !s.namespaces.labelsUnknown[ns] {
			s.out.finding(NamespaceUnlabeled, ns, "", fmt.Sprintf("%d Windows pods, but the namespace is not labelled %s=true", r.WindowsPods, policy.LabelEnabled))
		}
	}
	return rows, s.changes.rows()
}
