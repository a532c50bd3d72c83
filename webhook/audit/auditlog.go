package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/termsafe"
)

// LogReport summarises wincompat's auditAnnotations in an API server audit log. The API server stores
// them under the webhook's name: pods.wincompat.io/changes, workloads.wincompat.io/build, ...
type LogReport struct {
	// Requests is the number of audited requests wincompat annotated that took effect; dry runs and
	// requests the API server rejected after admission changed nothing and are only counted.
	Requests   int         `json:"requests"`
	DryRuns    int         `json:"dryRuns"`
	Rejected   int         `json:"rejected"`
	ByResource []CountRow  `json:"byResource"`
	Namespaces []CountRow  `json:"namespaces"`
	Changes    []ChangeRow `json:"changes"`
	Builds     []CountRow  `json:"builds"`
	// WarnMode counts the requests (of Requests) answered in warn mode, whose changes were not made;
	// WouldChange are those changes.
	WarnMode    int         `json:"warnMode"`
	WouldChange []ChangeRow `json:"wouldChange"`
	// SkippedLines are lines that are not audit events (reported, not fatal).
	SkippedLines int `json:"skippedLines"`
	// BadAnnotations are changes annotations that do not parse.
	BadAnnotations int `json:"badAnnotations"`
}

// CountRow is a key and how often it occurred.
type CountRow struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
}

type auditEvent struct {
	AuditID        string `json:"auditID"`
	Stage          string `json:"stage"`
	Verb           string `json:"verb"`
	RequestURI     string `json:"requestURI"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	Annotations map[string]string `json:"annotations"`
}

// wincompatKey returns the key wincompat gave an audit annotation ("changes") when the API server's
// prefixed key is one of wincompat's webhooks.
func wincompatKey(k string) (string, bool) {
	prefix, key, ok := strings.Cut(k, "/")
	return key, ok && strings.HasSuffix(prefix, "wincompat.io")
}

// SummariseLog reads an audit log (JSON lines, as --audit-log-path writes) and summarises wincompat's
// annotations. A request audited at several stages counts once.
func SummariseLog(r io.Reader) (*LogReport, error) {
	rep := &LogReport{}
	seen := map[string]bool{}
	byResource, byNamespace, builds := map[string]int{}, map[string]int{}, map[string]int{}
	changes, would := changeTally{}, changeTally{}
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var ev auditEvent
			if jerr := json.Unmarshal(line, &ev); jerr != nil || ev.AuditID == "" {
				rep.SkippedLines++
			} else if !seen[ev.AuditID] {
				if counted := summariseEvent(&ev, rep, byResource, byNamespace, builds, changes, would); counted {
					seen[ev.AuditID] = true
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the audit log: %w", err)
		}
	}
	rep.ByResource, rep.Namespaces, rep.Builds = counts(byResource), counts(byNamespace), counts(builds)
	rep.Changes, rep.WouldChange = changes.rows(), would.rows()
	return rep, nil
}

func summariseEvent(ev *auditEvent, rep *LogReport, byResource, byNamespace, builds map[string]int, changes, would changeTally) bool {
	var changesJSON, build, source string
	found, warnMode := false, false
	for k, v := range ev.Annotations {
		key, ok := wincompatKey(k)
		if !ok {
			continue
		}
		found = true
		switch key {
		case "changes":
			changesJSON = v
		case "build":
			build = v
		case "build-source":
			source = v
		case "mode":
			warnMode = v == policy.ModeWarn
		case "would-changes":
			changesJSON = v
		}
	}
	if !found {
		return false
	}
	if u, err := url.Parse(ev.RequestURI); err == nil && u.Query().Has("dryRun") {
		rep.DryRuns++
		return true
	}
	if ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 400 {
		rep.Rejected++
		return true
	}
	rep.Requests++
	resource, ns := "unknown", ""
	if ev.ObjectRef != nil {
		resource, ns = ev.ObjectRef.Resource, ev.ObjectRef.Namespace
		if ev.ObjectRef.Subresource != "" {
			resource += "/" + ev.ObjectRef.Subresource
		}
	}
	byResource[ev.Verb+" "+resource]++
	byNamespace[ns]++
	if warnMode {
		rep.WarnMode++
		changes = would
	}
	if build != "" {
		builds[build+" ("+source+")"]++
	}
	if changesJSON != "" {
		list, err := policy.DecodeChanges(changesJSON)
		if err != nil {
			rep.BadAnnotations++
			return true
		}
		changes.add(list, ns, strings.HasPrefix(resource, "pods"))
	}
	return true
}

func counts(m map[string]int) []CountRow {
	out := make([]CountRow, 0, len(m))
	for k, v := range m {
		out = append(out, CountRow{Key: k, Count: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// WriteTable prints the log summary for people.
func (l *LogReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "REQUESTS wincompat annotated: %d (not counted: %d dry runs, %d rejected after admission)\n", l.Requests, l.DryRuns, l.Rejected)
	section := func(title string, rows []CountRow) {
		fmt.Fprintln(w, "\n"+title)
		if len(rows) == 0 {
			fmt.Fprintln(w, "  (none)")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, r := range rows {
			key := r.Key
			if key == "" {
				key = "(cluster-scoped)"
			}
			fmt.Fprintf(tw, "  %s\t%d\n", termsafe.String(key), r.Count)
		}
		_ = tw.Flush()
	}
	section("BY REQUEST", l.ByResource)
	section("BY NAMESPACE", l.Namespaces)
	section("BUILDS CHOSEN", l.Builds)
	fmt.Fprintln(w, "\nCHANGES")
	if len(l.Changes) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, c := range l.Changes {
		fmt.Fprintf(w, "  %s\n", termsafe.String(c.Sentence()))
	}
	if l.WarnMode > 0 {
		fmt.Fprintf(w, "\nWOULD CHANGE (%d requests in warn mode, nothing changed)\n", l.WarnMode)
		for _, c := range l.WouldChange {
			fmt.Fprintf(w, "  %s\n", termsafe.String(c.Sentence()))
		}
	}
	if l.SkippedLines > 0 || l.BadAnnotations > 0 {
		fmt.Fprintf(w, "\nSKIPPED: %d lines that are not audit events, %d changes annotations that do not parse\n", l.SkippedLines, l.BadAnnotations)
	}
	return nil
}

// WriteJSON prints the log summary for tools, as Report.WriteJSON does.
func (l *LogReport) WriteJSON(w io.Writer) error {
	return writeJSON(w, l)
}

// WriteCSV prints the change summary of the log.
func (l *LogReport) WriteCSV(w io.Writer) error {
	rep := Report{Changes: l.Changes}
	return rep.WriteCSV(w, ViewChanges)
}
