package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestSummariseLog(t *testing.T) {
	log := strings.Join([]string{
		// One request audited at two stages counts once.
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseStarted","verb":"create","objectRef":{"resource":"pods","namespace":"web","name":"p1"},"annotations":{"pods.wincompat.io/changes":"{\"v\":3,\"c\":[[\"s\",\"spec.containers[a].securityContext.runAsUser\",null,null,null,\"x\"],[\"s\",\"spec.containers[b].securityContext.runAsUser\",null,null,null,\"x\"]]}","pods.wincompat.io/build":"10.0.20348","pods.wincompat.io/build-source":"image"}}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"pods","namespace":"web","name":"p1"},"annotations":{"pods.wincompat.io/changes":"{\"v\":3,\"c\":[[\"s\",\"spec.containers[a].securityContext.runAsUser\",null,null,null,\"x\"]]}"}}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"deployments","namespace":"api","name":"d"},"annotations":{"workloads.wincompat.io/changes":"{\"v\":3,\"c\":[[\"s\",\"spec.securityContext.fsGroup\",null,null,null,\"x\"]]}"}}`,
		// Not ours, not an event, and a corrupt record.
		`{"kind":"Event","auditID":"a3","verb":"get","objectRef":{"resource":"pods"},"annotations":{"authorization.k8s.io/decision":"allow"}}`,
		`this is not JSON`,
		`{"kind":"Event","auditID":"a4","verb":"create","objectRef":{"resource":"pods","namespace":"web"},"annotations":{"pods-default-os.wincompat.io/changes":"[oops"}}`,
		``,
	}, "\n")
	rep, err := SummariseLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 3 || rep.SkippedLines != 1 || rep.BadAnnotations != 1 {
		t.Errorf("requests %d, skipped %d, bad %d", rep.Requests, rep.SkippedLines, rep.BadAnnotations)
	}
	want := []string{
		"strip spec.containers[*].securityContext.runAsUser: 1 pod in 1 namespace",
		"strip spec.securityContext.fsGroup: 1 template in 1 namespace",
	}
	if len(rep.Changes) != 2 || rep.Changes[0].Sentence() != want[0] || rep.Changes[1].Sentence() != want[1] {
		t.Errorf("changes: %+v", rep.Changes)
	}
	if len(rep.Builds) != 1 || rep.Builds[0].Key != "10.0.20348 (image)" {
		t.Errorf("builds: %+v", rep.Builds)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil || !strings.Contains(out.String(), "REQUESTS wincompat annotated: 3") {
		t.Errorf("table: %v\n%s", err, out.String())
	}
}

func TestRenderings(t *testing.T) {
	rep := &Report{
		Namespaces: []NamespaceRow{{Namespace: "web", OptedIn: true, WindowsPods: 3, Covered: 3, Changed: 2}},
		Changes:    []ChangeRow{{Action: "strip", Field: "spec.securityContext.runAsUser", Pods: 412, Namespaces: 9}},
		Objects:    []ObjectRow{{Namespace: "web", Kind: "Pod", Name: "p, \"quoted\"", Covered: true, Changes: 2}},
		Findings:   []Finding{{Kind: NotCovered, Namespace: "legacy", Object: "Pod/x", Detail: "its namespace is not labelled"}},
		Incomplete: []string{"pods in secret-ns: forbidden"},
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table, ViewSummary); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAMESPACES", "strip spec.securityContext.runAsUser: 412 pods in 9 namespaces", "FINDINGS", "not-covered", "INCOMPLETE", "secret-ns"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var csvOut bytes.Buffer
	if err := rep.WriteCSV(&csvOut, ViewObjects); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(csvOut.String(), `"p, ""quoted"""`) || !strings.HasPrefix(csvOut.String(), "namespace,kind,name,") {
		t.Errorf("CSV quoting or header wrong:\n%s", csvOut.String())
	}
	if err := rep.WriteCSV(&csvOut, ViewSummary); err == nil {
		t.Error("CSV of the summary view (several tables) must be refused")
	}
}

// Object strings reach the table and CSV escaped, so that a pod author's annotation or name cannot
// drive the operator's terminal; the JSON keeps each value exactly, escaped as JSON.
func TestRenderingsEscapeForTerminals(t *testing.T) {
	const evil = "\x1b]0;owned\x07\x1b[2J\r\u009b1m\u202e\x7f"
	rep := &Report{
		Namespaces: []NamespaceRow{{Namespace: "web" + evil}},
		Changes:    []ChangeRow{{Action: "strip" + evil, Field: "spec.x" + evil, Pods: 1, Namespaces: 1}},
		Objects:    []ObjectRow{{Namespace: "web", Kind: "Pod", Name: "p" + evil, Build: evil, BuildSource: evil, Node: evil, NodeBuild: evil}},
		Findings:   []Finding{{Kind: BadAnnotation, Namespace: "web", Object: "Pod/p" + evil, Detail: "wincompat.io/changes: " + evil}},
		Incomplete: []string{"pods in x" + evil},
		Notes:      []string{evil},
		Truncated:  map[string]int{"kind" + evil: 1},
		Builds:     &BuildsSummary{Builds: []string{"10.0.20348"}, Reasons: []ReasonRow{{Reason: "image" + evil, Pods: 1}}},
	}
	raw := func(b []byte) string {
		for i, r := range string(b) {
			if r == '\n' {
				continue
			}
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
				return fmt.Sprintf("%U at %d", r, i)
			}
		}
		return ""
	}
	for _, view := range Views {
		var out bytes.Buffer
		if err := rep.WriteTable(&out, view); err != nil {
			t.Fatal(err)
		}
		if what := raw(out.Bytes()); what != "" {
			t.Errorf("table, view %s: raw %s:\n%q", view, what, out.String())
		}
		if view == ViewSummary {
			continue
		}
		out.Reset()
		if err := rep.WriteCSV(&out, view); err != nil {
			t.Fatal(err)
		}
		if what := raw(out.Bytes()); what != "" {
			t.Errorf("CSV, view %s: raw %s:\n%q", view, what, out.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if what := raw(js.Bytes()); what != "" {
		t.Errorf("JSON: raw %s:\n%s", what, js.String())
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Objects[0].Name != "p"+evil || back.Findings[0].Detail != rep.Findings[0].Detail {
		t.Errorf("JSON changed the values: %q, %q", back.Objects[0].Name, back.Findings[0].Detail)
	}
	log := &LogReport{Namespaces: []CountRow{{Key: "web" + evil, Count: 1}}, Changes: []ChangeRow{{Action: "strip", Field: evil, Pods: 1, Namespaces: 1}}}
	var out bytes.Buffer
	if err := log.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if what := raw(out.Bytes()); what != "" {
		t.Errorf("log table: raw %s:\n%q", what, out.String())
	}
}
