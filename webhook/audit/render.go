package audit

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/wincompat/wincompat/webhook/termsafe"
)

// Views of a report.
const (
	ViewSummary    = "summary" // namespaces, changes and findings
	ViewNamespaces = "namespaces"
	ViewChanges    = "changes"
	ViewObjects    = "objects"
	ViewFindings   = "findings"
)

// Views lists the views, for flag help and validation.
var Views = []string{ViewSummary, ViewNamespaces, ViewChanges, ViewObjects, ViewFindings}

// table is one view as rows of cells.
type table struct {
	title  string
	header []string
	rows   [][]string
}

func (r *Report) tables(view string) ([]table, error) {
	var out []table
	if view == ViewSummary || view == ViewNamespaces {
		t := table{title: "NAMESPACES", header: []string{"namespace", "opted-in", "windows-pods", "covered", "changed", "workloads", "templates-changed"}}
		for _, n := range r.Namespaces {
			t.rows = append(t.rows, []string{n.Namespace, strconv.FormatBool(n.OptedIn), itoa(n.WindowsPods), itoa(n.Covered), itoa(n.Changed), itoa(n.Workloads), itoa(n.Templates)})
		}
		out = append(out, t)
	}
	if view == ViewSummary || view == ViewChanges {
		t := table{title: "CHANGES", header: []string{"action", "field", "pods", "templates", "namespaces"}}
		for _, c := range r.Changes {
			t.rows = append(t.rows, []string{c.Action, c.Field, itoa(c.Pods), itoa(c.Templates), itoa(c.Namespaces)})
		}
		out = append(out, t)
	}
	if view == ViewObjects {
		t := table{title: "OBJECTS", header: []string{"namespace", "kind", "name", "covered", "changes", "build", "build-source", "node", "node-build"}}
		err := r.eachObject(func(o *ObjectRow) error {
			t.rows = append(t.rows, []string{o.Namespace, o.Kind, o.Name, strconv.FormatBool(o.Covered), itoa(o.Changes), o.Build, o.BuildSource, o.Node, o.NodeBuild})
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if view == ViewSummary || view == ViewFindings {
		t := table{title: "FINDINGS", header: []string{"kind", "namespace", "object", "detail"}}
		for _, f := range r.Findings {
			t.rows = append(t.rows, []string{f.Kind, f.Namespace, f.Object, f.Detail})
		}
		out = append(out, t)
	}
	return out, nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// WriteTable prints the view for people: one aligned table per section, and the changes as sentences.
// Every string from the cluster goes through termsafe.String: names and annotation values are a pod
// author's, and this goes to a terminal.
func (r *Report) WriteTable(w io.Writer, view string) error {
	tables, err := r.tables(view)
	if err != nil {
		return err
	}
	for i, t := range tables {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, t.title)
		if len(t.rows) == 0 {
			fmt.Fprintln(w, "  (none)")
			continue
		}
		if t.title == "CHANGES" {
			for _, c := range r.Changes {
				fmt.Fprintf(w, "  %s\n", termsafe.String(c.Sentence()))
			}
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  "+strings.ToUpper(strings.Join(t.header, "\t")))
		for _, row := range t.rows {
			fmt.Fprintln(tw, "  "+strings.Join(dashes(row), "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, kind := range sortedKeys(r.Truncated) {
		fmt.Fprintf(w, "  ... and %d more %s findings\n", r.Truncated[kind], termsafe.String(kind))
	}
	if s := r.Builds; s != nil && (view == ViewSummary || view == ViewFindings) {
		fmt.Fprintf(w, "\nBUILD CHECK (objects that could not run, by reason)\n  %s\n", s.Sentence())
		if hv := s.HyperVSentence(); hv != "" {
			fmt.Fprintf(w, "  %s\n", termsafe.String(hv))
		}
		for _, reason := range s.Reasons {
			var what []string
			if reason.Pods > 0 {
				what = append(what, plural(reason.Pods, "pod"))
			}
			if reason.Templates > 0 {
				what = append(what, plural(reason.Templates, "template"))
			}
			fmt.Fprintf(w, "  %s: %s\n", strings.Join(what, ", "), termsafe.String(reason.Reason))
		}
	}
	if len(r.Incomplete) > 0 {
		fmt.Fprintln(w, "\nINCOMPLETE (the report covers the rest)")
		for _, s := range r.Incomplete {
			fmt.Fprintln(w, "  "+termsafe.String(s))
		}
	}
	return nil
}

// Sentence is the change as a line: "strip spec.securityContext.runAsUser: 412 pods in 9 namespaces".
func (c ChangeRow) Sentence() string {
	var what []string
	if c.Pods > 0 {
		what = append(what, plural(c.Pods, "pod"))
	}
	if c.Templates > 0 {
		what = append(what, plural(c.Templates, "template"))
	}
	return fmt.Sprintf("%s %s: %s in %s", c.Action, c.Field, strings.Join(what, " and "), plural(c.Namespaces, "namespace"))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// dashes is a row for the terminal: empty cells as "-", every cell escaped.
func dashes(row []string) []string {
	out := make([]string, len(row))
	for i, c := range row {
		if c == "" {
			c = "-"
		}
		out[i] = termsafe.String(c)
	}
	return out
}

// WriteJSON prints the whole report (every view) for tools: every value exactly, as JSON escapes it,
// and the characters encoding/json leaves raw that a terminal could act on escaped too (termsafe.JSON).
// Rows kept on disk (Options.ObjectsOnDisk) are written one by one as they are merged, into the same
// bytes json.MarshalIndent would make of the whole report.
func (r *Report) WriteJSON(w io.Writer) error {
	if r.onDisk == nil {
		return writeJSON(w, r)
	}
	rest := *r
	rest.Objects, rest.onDisk = nil, nil
	doc, err := json.MarshalIndent(&rest, "", "  ")
	if err != nil {
		return err
	}
	// MarshalIndent puts each field of the report on a line of its own at two spaces (a raw newline
	// is never inside a string), and "objects" goes right before "findings", which is never omitted.
	at := bytes.Index(doc, []byte("\n  \"findings\": "))
	if at < 0 {
		return errors.New("the report's JSON has no findings")
	}
	bw := bufio.NewWriter(w)
	bw.Write(termsafe.JSON(doc[:at]))
	if r.onDisk.count > 0 {
		bw.WriteString("\n  \"objects\": [")
		sep := "\n    "
		err = r.onDisk.each(func(o *ObjectRow) error {
			row, err := json.MarshalIndent(o, "    ", "  ")
			if err != nil {
				return err
			}
			bw.WriteString(sep)
			_, err = bw.Write(termsafe.JSON(row))
			sep = ",\n    "
			return err
		})
		if err != nil {
			return err
		}
		bw.WriteString("\n  ],")
	}
	bw.Write(termsafe.JSON(doc[at:]))
	bw.WriteByte('\n')
	return bw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(termsafe.JSON(b), '\n'))
	return err
}

// WriteCSV prints one view as CSV with a header row; the summary view is not one table, so CSV needs
// namespaces, changes, objects or findings.
func (r *Report) WriteCSV(w io.Writer, view string) error {
	if view == ViewSummary {
		return fmt.Errorf("CSV holds one table: choose --view %s, %s, %s or %s", ViewNamespaces, ViewChanges, ViewObjects, ViewFindings)
	}
	tables, err := r.tables(view)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	for _, t := range tables {
		if err := cw.Write(t.header); err != nil {
			return err
		}
		// Escaped as in the table: CSV is read on terminals too; JSON keeps the exact values.
		for _, row := range t.rows {
			if err := cw.Write(termsafe.Strings(row)); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
