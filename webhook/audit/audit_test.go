package audit

import (
	"bytes"
	"strings"
	"testing"
)

func TestSummariseLog(t *testing.T) {
	log := strings.Join([]string{
		// One request audited at two stages counts once.
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseStarted","verb":"create","objectRef":{"resource":"pods","namespace":"web","name":"p1"},"annotations":{"pods.wincompat.io/changes":"[{\"action\":\"strip\",\"path\":\"spec.containers[a].securityContext.runAsUser\",\"reason\":\"x\"},{\"action\":\"strip\",\"path\":\"spec.containers[b].securityContext.runAsUser\",\"reason\":\"x\"}]","pods.wincompat.io/build":"10.0.20348","pods.wincompat.io/build-source":"image"}}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"pods","namespace":"web","name":"p1"},"annotations":{"pods.wincompat.io/changes":"[{\"action\":\"strip\",\"path\":\"spec.containers[a].securityContext.runAsUser\",\"reason\":\"x\"}]"}}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"deployments","namespace":"api","name":"d"},"annotations":{"workloads.wincompat.io/changes":"[{\"action\":\"strip\",\"path\":\"spec.securityContext.fsGroup\",\"reason\":\"x\"}]"}}`,
		// Not ours, not an event, and a corrupt list.
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
