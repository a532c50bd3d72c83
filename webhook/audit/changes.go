package audit

import (
	"sort"

	"github.com/wincompat/wincompat/policy"
)

// changeTally counts changes per (action, field): in how many pods and templates, and namespaces. The
// cluster report and the audit-log summary both build their change rows with it.
type changeTally map[[2]string]*changeAcc

type changeAcc struct {
	pods, templates int
	namespaces      map[string]bool
}

// add counts one object's changes; several containers of one object count once.
func (t changeTally) add(changes []policy.Change, ns string, pod bool) {
	seen := map[[2]string]bool{}
	for _, c := range changes {
		k := [2]string{string(c.Action), c.Field()}
		if seen[k] {
			continue
		}
		seen[k] = true
		acc, ok := t[k]
		if !ok {
			acc = &changeAcc{namespaces: map[string]bool{}}
			t[k] = acc
		}
		if pod {
			acc.pods++
		} else {
			acc.templates++
		}
		acc.namespaces[ns] = true
	}
}

// rows are the tallies, most frequent first, then by action and field.
func (t changeTally) rows() []ChangeRow {
	out := make([]ChangeRow, 0, len(t))
	for k, acc := range t {
		out = append(out, ChangeRow{Action: k[0], Field: k[1], Pods: acc.pods, Templates: acc.templates, Namespaces: len(acc.namespaces)})
	}
	sort.Slice(out, func(i, j int) bool {
		ci, cj := out[i], out[j]
		if ci.Pods+ci.Templates != cj.Pods+cj.Templates {
			return ci.Pods+ci.Templates > cj.Pods+cj.Templates
		}
		return ci.Action+ci.Field < cj.Action+cj.Field
	})
	return out
}
