package admissionpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// The files in deploy/ that carry the webhooks' matchConditions, generated from WebhookConditions.
var (
	helmConditions    = filepath.Join("..", "..", "deploy", "helm", "wincompat", "templates", "_matchconditions.tpl")
	webhookMutating   = filepath.Join("..", "..", "deploy", "webhook", "mutatingwebhookconfiguration.yaml")
	webhookValidating = filepath.Join("..", "..", "deploy", "webhook", "validatingwebhookconfiguration.yaml")
)

// helmPolicyConfigMapArg is the template action the chart's policy-configmap helper reads its
// ConfigMap's name from (the include's argument).
const helmPolicyConfigMapArg = "{{ . }}"

// plainPolicyConfigMap is the policy ConfigMap of deploy/webhook: release wincompat.
const plainPolicyConfigMap = "wincompat-policy"

// renderHelmConditions is the chart's _matchconditions.tpl: one named template per condition, which
// the webhook configuration templates include.
func renderHelmConditions() string {
	var b strings.Builder
	b.WriteString(`{{- /*
The webhooks' matchConditions, generated from the tables in policy by policy/admissionpolicy
(webhookconditions.go): do not edit, run UPDATE_GOLDEN=1 go test ./policy/admissionpolicy.
deploy/webhook carries the same expressions. policy-configmap takes the ConfigMap's name.
*/ -}}
`)
	conds := append(WebhookConditions(), PolicyConfigMapCondition(helmPolicyConfigMapArg))
	for _, c := range conds {
		fmt.Fprintf(&b, "{{- define \"wincompat.matchCondition.%s\" -}}\n%s\n{{- end -}}\n", c.Name, c.Expression)
	}
	return b.String()
}

// yamlExpression renders `expression: <expr>` at indent: a double-quoted line when it fits, else a
// folded block (>-) broken at single spaces, which YAML folds back into exactly expr.
func yamlExpression(indent int, expr string) []string {
	pad := strings.Repeat(" ", indent)
	quoted, _ := json.Marshal(expr) // a string always marshals; JSON strings are YAML double-quoted scalars
	const width = 120
	if line := pad + "expression: " + string(quoted); len(line) <= width || !foldable(expr) {
		return []string{line}
	}
	lines := []string{pad + "expression: >-"}
	body := pad + "  "
	line := ""
	for _, word := range strings.Split(expr, " ") {
		if line != "" && len(body)+len(line)+1+len(word) > width {
			lines = append(lines, body+line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, body+line)
}

// foldable: a folded block scalar gives back expr exactly when expr has no line break, no run of
// spaces and no space at either end.
func foldable(expr string) bool {
	return !strings.ContainsAny(expr, "\n\t\r") && !strings.Contains(expr, "  ") && strings.TrimSpace(expr) == expr
}

// spliceConditions replaces, in a webhook configuration's YAML, the expression of each matchCondition
// named in conds (the `expression:` line after `- name: <name>` and its continuation lines) with its
// rendering. It fails on a condition the file does not have.
func spliceConditions(data []byte, conds []admissionregistrationv1.MatchCondition) ([]byte, error) {
	lines := strings.Split(string(data), "\n")
	for _, c := range conds {
		found := false
		for i := 0; i+1 < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "- name: "+c.Name || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "expression:") {
				continue
			}
			indent := len(lines[i+1]) - len(strings.TrimLeft(lines[i+1], " "))
			end := i + 2
			for end < len(lines) && strings.TrimSpace(lines[end]) != "" && len(lines[end])-len(strings.TrimLeft(lines[end], " ")) > indent {
				end++
			}
			lines = append(lines[:i+1], append(yamlExpression(indent, c.Expression), lines[end:]...)...)
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("no matchCondition %s with an expression", c.Name)
		}
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// conditionsMade says where the webhooks' matchConditions come from.
const conditionsMade = "its matchConditions are generated from policy"

// checkGenerated compares the file at path with want, generated from what made says; UPDATE_GOLDEN=1
// writes want.
func checkGenerated(t *testing.T, path string, want []byte, made string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale: %s; run UPDATE_GOLDEN=1 go test ./policy/admissionpolicy and review the diff", path, made)
}

// The webhooks' matchConditions in both deploy/ forms are the generated ones: the chart's helper
// file, and each expression of deploy/webhook (the rest of those files is written by hand).
func TestDeployMatchConditions(t *testing.T) {
	checkGenerated(t, helmConditions, []byte(renderHelmConditions()), conditionsMade)
	for _, f := range []struct {
		path  string
		conds []admissionregistrationv1.MatchCondition
	}{
		{webhookMutating, WebhookConditions()},
		{webhookValidating, []admissionregistrationv1.MatchCondition{PolicyConfigMapCondition(plainPolicyConfigMap)}},
	} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := spliceConditions(data, f.conds)
		if err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
		checkGenerated(t, f.path, want, conditionsMade)
	}
}

// What the API server reads from deploy/webhook is the generated CEL, byte for byte: the folding of
// long expressions gives them back exactly, and every webhook has its condition.
func TestDeployWebhooksCarryTheGeneratedConditions(t *testing.T) {
	want := map[string]string{}
	for _, c := range append(WebhookConditions(), PolicyConfigMapCondition(plainPolicyConfigMap)) {
		want[c.Name] = c.Expression
	}
	for _, path := range []string{webhookMutating, webhookValidating} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var config struct {
			Webhooks []struct {
				Name            string                                   `json:"name"`
				MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions"`
			} `json:"webhooks"`
		}
		if err := yaml.Unmarshal(data, &config); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, w := range config.Webhooks {
			if len(w.MatchConditions) == 0 {
				t.Errorf("%s: webhook %s has no matchConditions", path, w.Name)
			}
			for _, c := range w.MatchConditions {
				if c.Expression != want[c.Name] {
					t.Errorf("%s: webhook %s condition %s is\n%s\nwant\n%s", path, w.Name, c.Name, c.Expression, want[c.Name])
				}
			}
		}
	}
}

// A hand edit of a generated expression in deploy/webhook is undone by the generator, so
// TestDeployMatchConditions reports it as stale.
func TestDeployHandEditIsStale(t *testing.T) {
	data, err := os.ReadFile(webhookMutating)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(data, []byte("'beta.kubernetes.io/os'"), []byte("'beta.kubernetes.io/arch'"), 1)
	if bytes.Equal(edited, data) {
		t.Fatalf("%s names no beta OS label to edit", webhookMutating)
	}
	spliced, err := spliceConditions(edited, WebhookConditions())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(spliced, edited) || !bytes.Equal(spliced, data) {
		t.Errorf("the generator does not restore a hand-edited expression of %s", webhookMutating)
	}
}

// The webhooks' matchConditions compile on the API server, alone and within the matchConditions'
// budget, as it validates a webhook configuration.
func TestWebhookConditionsCompile(t *testing.T) {
	conds := append(WebhookConditions(), PolicyConfigMapCondition(plainPolicyConfigMap))
	for _, c := range conds {
		t.Run(c.Name, func(t *testing.T) {
			checkCompiles(t, []celExpression{{where: "webhook matchConditions " + c.Name, kind: matchCondition, expr: c.Expression}}, false)
		})
	}
}
