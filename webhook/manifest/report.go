package manifest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/termsafe"
)

// WriteExplain prints, per Pod and workload, every change with its reason and where its rule comes
// from (policy.Decision.Rule, from the rule the change was made with), for people reviewing what
// wincompat does to a chart.
func WriteExplain(w io.Writer, docs []Document) error {
	for i, d := range docs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		// The manifest's names and values may come from anyone: escaped for the terminal.
		fmt.Fprintln(w, termsafe.String(d.Label()+": "+explainHeader(d)))
		if len(d.Decision.Changes) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ACTION\tFIELD\tVALUE\tREASON\tRULE")
		for _, c := range d.Decision.Changes {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", termsafe.String(string(c.Action)), termsafe.String(c.Path), termsafe.String(explainValue(c)),
				termsafe.String(c.Reason), termsafe.String(d.Decision.Rule(c)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func explainHeader(d Document) string {
	dec := d.Decision
	var parts []string
	switch {
	case !dec.Handled():
		return "left alone (" + dec.Skipped + ")"
	case dec.Windows:
		parts = append(parts, "Windows")
	default:
		parts = append(parts, "no operating system chosen, pinned to Linux")
	}
	parts = append(parts, plural(len(dec.Changes), "change"))
	if dec.Build != "" {
		parts = append(parts, "build "+dec.Build+" from "+dec.BuildSource)
	}
	if d.WarnMode {
		parts = append(parts, "warn mode: nothing applied")
	}
	return strings.Join(parts, ", ")
}

// explainValue shows what a change did to the value: from → to, each cut to a readable length. A
// warning changed nothing: its From is the value it is about, shown alone.
func explainValue(c policy.Change) string {
	from, to := short(string(c.From)), short(string(c.To))
	switch {
	case c.Action == policy.Warn && to == "" && from != "":
		return from
	case from == "" && to == "":
		return "-"
	case from == "":
		return "→ " + to
	case to == "":
		return from + " → (removed)"
	default:
		return from + " → " + to
	}
}

func short(s string) string {
	const most = 48
	if r := []rune(s); len(r) > most {
		return string(r[:most-1]) + "…"
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// WriteDiff prints a unified diff of every document wincompat changed, for review in CI; unchanged
// documents print nothing. The before side is the document as read, laid out as the output is
// (Document.asWritten): the layout the YAML encoder gives every mutated document (blank lines
// dropped, sequences indented under their keys) is no change of wincompat's, and would bury its own.
func WriteDiff(w io.Writer, docs []Document) error {
	for _, d := range docs {
		if !d.Mutated {
			continue
		}
		diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(d.asWritten())), B: difflib.SplitLines(string(d.After)),
			FromFile: "a/" + d.Label(), ToFile: "b/" + d.Label(), Context: 3,
		})
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, diff); err != nil {
			return err
		}
	}
	return nil
}
