package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
)

// The chart's ValidatingAdmissionPolicy <release>-own-writes is written by hand in the chart
// (templates/validatingadmissionpolicy.yaml): its CEL reads the release's names and values, which Helm
// writes in. The test renders it as Helm would for release wincompat in wincompat-system with the
// chart's default values, substituting each template action from the table below (a condition's part
// is rendered whatever its values), and compiles every expression with the API server's compiler. An action the table does not know fails the test, so a
// new value in the CEL is added here with the value it renders to.
var ownWritesTemplate = filepath.Join("..", "..", "deploy", "helm", "wincompat", "templates", "validatingadmissionpolicy.yaml")

// helmAction is one {{ ... }} of a template, with its trim markers.
var helmAction = regexp.MustCompile(`\{\{-?\s*(.*?)\s*-?\}\}`)

// ownWritesActions are what the chart renders each action of the policy's document to.
func ownWritesActions(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "wincompat", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		TLS struct {
			SecretName string `json:"secretName"`
		} `json:"tls"`
		RuntimeClasses struct {
			Names []string `json:"names"`
		} `json:"runtimeClasses"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	const release, namespace = "wincompat", "wincompat-system"
	toJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	user := "system:serviceaccount:" + namespace + ":" + release
	// The values set no policy, so the template falls back to policy/default.yaml's handler.
	handler := policy.Default().RuntimeClassHandler
	return map[string]string{
		`include "wincompat.labels" . | nindent 4`: "{}",
		`$fullname`:          release,
		`$fullname | toJson`: toJSON(release),
		// The chart's wincompat.webhookConfigName.
		`$webhookConfigName | toJson`: toJSON("0100-" + release),
		`$webhookConfigName`:          "0100-" + release,
		`printf "request.userInfo.username == %s" ($user | toJson) | quote`: strconv.Quote("request.userInfo.username == " + toJSON(user)),
		`.Values.runtimeClasses.names | toJson`:                             toJSON(values.RuntimeClasses.Names),
		`join ", " .Values.runtimeClasses.names`:                            strings.Join(values.RuntimeClasses.Names, ", "),
		`$handler | toJson`:                                                 toJSON(handler),
		`$handler`:                                                          handler,
		`.Values.tls.secretName | toJson`:                                   toJSON(values.TLS.SecretName),
		// policy.OSTaintKeys and the default policy's windowsNodeTaints (os).
		`$taintKeys | uniq | toJson | quote`: strconv.Quote(toJSON(policy.OSTaintKeys())),
		`.Values.tls.secretName`:             values.TLS.SecretName,
		// misplacedPods.remediate's rule and validation: rendered, so that they are compiled too.
		`if and .Values.misplacedPods.watch .Values.misplacedPods.remediate.enabled`:       "",
		`if not (and .Values.misplacedPods.watch .Values.misplacedPods.remediate.enabled)`: "",
		`end`: "",
	}
}

// renderOwnWrites is the chart's own-writes ValidatingAdmissionPolicy, rendered for the default release.
func renderOwnWrites(t *testing.T) admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	data, err := os.ReadFile(ownWritesTemplate)
	if err != nil {
		t.Fatal(err)
	}
	const head = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n"
	start := strings.Index(string(data), head)
	if start < 0 {
		t.Fatalf("%s has no ValidatingAdmissionPolicy", ownWritesTemplate)
	}
	doc, _, _ := strings.Cut(string(data[start:]), "\n---\n")
	actions := ownWritesActions(t)
	var unknown []string
	rendered := helmAction.ReplaceAllStringFunc(doc, func(a string) string {
		inner := helmAction.FindStringSubmatch(a)[1]
		v, ok := actions[inner]
		if !ok {
			unknown = append(unknown, inner)
		}
		return v
	})
	if len(unknown) > 0 {
		t.Fatalf("%s: the test does not know what these actions render to; add them to ownWritesActions: %q", ownWritesTemplate, unknown)
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.UnmarshalStrict([]byte(rendered), &vap); err != nil {
		t.Fatalf("%s, rendered: %v\n%s", ownWritesTemplate, err, rendered)
	}
	return vap
}

// validatingPolicyExpressions are the expressions of p in the order the API server compiles them.
func validatingPolicyExpressions(p admissionregistrationv1.ValidatingAdmissionPolicy) []celExpression {
	var out []celExpression
	for _, m := range p.Spec.MatchConditions {
		out = append(out, celExpression{where: p.Name + " matchConditions " + m.Name, kind: matchCondition, expr: m.Expression})
	}
	for _, v := range p.Spec.Variables {
		out = append(out, celExpression{where: p.Name + " variables " + v.Name, kind: variable, name: v.Name, expr: v.Expression})
	}
	for i, v := range p.Spec.Validations {
		out = append(out, celExpression{where: fmt.Sprintf("%s validations[%d]", p.Name, i), kind: validation, expr: v.Expression})
		if v.MessageExpression != "" {
			out = append(out, celExpression{where: fmt.Sprintf("%s validations[%d] messageExpression", p.Name, i), kind: -1})
		}
	}
	for _, a := range p.Spec.AuditAnnotations {
		out = append(out, celExpression{where: p.Name + " auditAnnotations " + a.Key, kind: -1})
	}
	return out
}

// Every expression of the chart's own-writes policy compiles on the API server within the budgets.
func TestChartValidatingAdmissionPolicyCompiles(t *testing.T) {
	vap := renderOwnWrites(t)
	exprs := validatingPolicyExpressions(vap)
	if len(exprs) < 5 {
		t.Fatalf("%s: %d expressions rendered, want its matchCondition, variable and three validations", ownWritesTemplate, len(exprs))
	}
	checkCompiles(t, exprs, true)
}
