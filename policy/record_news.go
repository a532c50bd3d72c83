package policy

// An admission review reports what was changed in it, whoever changed it. In hybrid the admission
// policies strip before the webhook sees the object, and they cannot return warnings: what they did is
// only in the record they wrote. So a review reports the changes of the object's record that the stored
// object's record does not hold, besides what its own pass found.

// RecordNews are the changes of arrived, the object's record as this pass received it, that stored, the
// record of the object as it is stored ("" on CREATE: every change of arrived is new), does not hold:
// what the admission policies, or an earlier pass of the webhook, changed in this request. Counted, not
// compared as sets: an UPDATE that sends again a field stripped before (helm upgrade's three-way merge
// keeps the record and sends the chart's Linux-only fields again) gets the admission policies' entry
// again, a second time in the record. Warnings are left out: they are findings, which the webhook makes
// again on every pass, not changes.
//
// The record is the requester's own until validation, so what it gives is bounded as a record is
// (record_bounds.go): only a change whose rule and field a table of ours produces (Change.MetricField),
// names in its path clipped to maxNameBytes, its reason to maxNewsReasonBytes, and at most
// maxFindingsPerRow kinds of change (action, field and reason) per rule, so that a record forged with a
// thousand reasons renders a bounded number of warnings, to its own author: entries the stored record
// already holds, whoever wrote them, are never news.
func RecordNews(arrived, stored string) []Change {
	if arrived == "" || arrived == stored {
		return nil
	}
	now, err := DecodeChanges(arrived)
	if err != nil {
		return nil // replaced by this pass, or left as it came: it says nothing of this request
	}
	var held map[changeKey]int
	if stored != "" {
		if before, err := DecodeChanges(stored); err == nil {
			held = make(map[changeKey]int, len(before))
			for _, c := range before {
				held[c.key()]++
			}
		}
	}
	type kind struct {
		action        Action
		field, reason string
	}
	kinds := map[Rule]map[kind]bool{}
	var news []Change
	for _, c := range now {
		if k := c.key(); held[k] > 0 {
			held[k]--
			continue
		}
		if c.Action == Warn || c.MetricField() == OtherField {
			continue
		}
		c.Path = clipPathNames(c.Path)
		c.Reason = clipMarked(c.Reason, maxNewsReasonBytes)
		_, field := splitOwner(c.Path)
		k := kind{c.Action, field, c.Reason}
		seen := kinds[c.Rule]
		if !seen[k] {
			if len(seen) >= maxFindingsPerRow {
				continue
			}
			if seen == nil {
				seen = map[kind]bool{}
				kinds[c.Rule] = seen
			}
			seen[k] = true
		}
		news = append(news, c)
	}
	return news
}

// maxNewsReasonBytes bounds a reason read from a record for a warning: longer than any reason of ours
// (an image reference and its platforms, clipped names of a build's images).
const maxNewsReasonBytes = 1024

// clipPathNames clips every bracketed name of path to maxNameBytes, as the webhook clips the names it
// records (named). A path with no name that long is returned as it is.
func clipPathNames(path string) string {
	if len(path) <= maxNameBytes {
		return path
	}
	var b []byte
	depth, start := 0, 0 // start: where the current top-level name begins
	last := 0            // what of path is copied to b
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '[':
			if depth == 0 {
				start = i + 1
			}
			depth++
		case ']':
			if depth == 0 {
				continue
			}
			depth--
			if depth == 0 && i-start > maxNameBytes {
				b = append(append(b, path[last:start]...), clipName(path[start:i])...)
				last = i
			}
		}
	}
	if b == nil {
		return path
	}
	return string(append(b, path[last:]...))
}

// Reporting is d as its review reports it: news (RecordNews) first, in the record's order, then the
// changes this pass found, rendered together by Warnings and Messages (a change in both is one). It is
// for rendering only: the audit annotations and the metrics count what this pass changed, d itself.
func (d Decision) Reporting(news []Change) Decision {
	if len(news) == 0 {
		return d
	}
	d.Changes = append(news[:len(news):len(news)], d.Changes...)
	d.changesJSON = ""
	return d
}
