package security

// Security checks of issue 8 that read what ships: the chart's RBAC and the pod it runs (from `helm
// template`, as an installer would get them) and the Dockerfile's final stage. Each checker returns its
// findings instead of failing, so that every test can also feed it a broken input and see it object:
// a checker that cannot fail proves nothing. The server's TLS and body-size refusals are checked over
// the wire in TestWebhookServerHTTPS.

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wincompat/wincompat/test/controlplane"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// bindingFindings checks that a binding gives the chart's own role to the chart's own ServiceAccount and
// nothing else: a binding to cluster-admin would make the role's least privilege moot.
func bindingFindings(obj *unstructured.Unstructured, serviceAccount, namespace string) []string {
	js, _ := obj.MarshalJSON()
	var b rbacv1.RoleBinding // a ClusterRoleBinding has the same roleRef and subjects
	if err := json.Unmarshal(js, &b); err != nil {
		return []string{err.Error()}
	}
	var findings []string
	wantRef := strings.TrimSuffix(obj.GetKind(), "Binding")
	if b.RoleRef.Kind != wantRef || b.RoleRef.Name != obj.GetName() {
		findings = append(findings, fmt.Sprintf("%s %s binds %s %s, not the chart's own %s", obj.GetKind(), obj.GetName(), b.RoleRef.Kind, b.RoleRef.Name, wantRef))
	}
	for _, s := range b.Subjects {
		if s.Kind != "ServiceAccount" || s.Name != serviceAccount || s.Namespace != namespace {
			findings = append(findings, fmt.Sprintf("%s %s binds subject %s %s/%s", obj.GetKind(), obj.GetName(), s.Kind, s.Namespace, s.Name))
		}
	}
	return findings
}

// pinnedWrites are the resources wincompat's ServiceAccount may write where RBAC bounds neither the name
// (create) nor the content: the chart's ValidatingAdmissionPolicy must match every write of them, in every
// API version. writesLeftToRBAC are the only others it may write, each harmless with RBAC alone: Events,
// its leader Lease (created once, of any name, in its own namespace) and its last-good ConfigMap by name.
// It writes no admission policy or binding: no admission control sees those writes, so nothing could
// pin them.
var (
	pinnedWrites = []string{
		"admissionregistration.k8s.io/mutatingwebhookconfigurations", "admissionregistration.k8s.io/validatingwebhookconfigurations",
		"node.k8s.io/runtimeclasses", "/secrets", "/pods",
	}
	writesLeftToRBAC = []string{"/events", "events.k8s.io/events", "coordination.k8s.io/leases", "/configmaps"}
	writeVerbs       = []string{"create", "update", "patch", "delete", "deletecollection", "*"}
)

// ownWritesFindings checks the chart's pin on its own ServiceAccount (templates/validatingadmissionpolicy.yaml):
// one ValidatingAdmissionPolicy, failing closed, matched to that user alone, bound with Deny and nothing
// narrowing it, covering every write the roles grant outside writesLeftToRBAC. What the policy's CEL
// allows is TestStolenTokenWidensNothing's to prove, on the real API server.
func ownWritesFindings(objs []*unstructured.Unstructured, user string) []string {
	var findings []string
	var policies []admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	var roles []*unstructured.Unstructured
	for _, obj := range objs {
		js, _ := obj.MarshalJSON()
		switch obj.GetKind() {
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			if err := json.Unmarshal(js, &p); err != nil {
				return []string{err.Error()}
			}
			policies = append(policies, p)
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := json.Unmarshal(js, &b); err != nil {
				return []string{err.Error()}
			}
			bindings = append(bindings, b)
		case "ClusterRole", "Role":
			roles = append(roles, obj)
		}
	}
	if len(policies) != 1 || len(bindings) != 1 {
		return []string{fmt.Sprintf("%d ValidatingAdmissionPolicies and %d bindings rendered, want one of each", len(policies), len(bindings))}
	}
	p, b := policies[0], bindings[0]
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		findings = append(findings, "the policy does not fail closed")
	}
	if p.Spec.ParamKind != nil {
		findings = append(findings, "the policy takes parameters")
	}
	wantCondition := fmt.Sprintf("request.userInfo.username == %q", user)
	if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != wantCondition {
		findings = append(findings, fmt.Sprintf("the policy's matchConditions %+v; want only %s", p.Spec.MatchConditions, wantCondition))
	}
	if b.Spec.PolicyName != p.Name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) ||
		b.Spec.ParamRef != nil || b.Spec.MatchResources != nil {
		findings = append(findings, fmt.Sprintf("the binding %+v does not bind %s alone, with Deny, everywhere", b.Spec, p.Name))
	}
	pinned := func(group, resource string) bool {
		if p.Spec.MatchConstraints == nil {
			return false
		}
		for _, r := range p.Spec.MatchConstraints.ResourceRules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Equal(r.APIVersions, []string{"*"}) &&
				len(r.ResourceNames) == 0 && (r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes) &&
				slices.Contains(r.Operations, admissionregistrationv1.Create) && slices.Contains(r.Operations, admissionregistrationv1.Update) &&
				slices.Contains(r.Operations, admissionregistrationv1.Delete) {
				return true
			}
		}
		return false
	}
	for _, key := range pinnedWrites {
		group, resource, _ := strings.Cut(key, "/")
		if !pinned(group, resource) {
			findings = append(findings, "the policy does not match every write of "+key)
		}
	}
	for _, role := range roles {
		rules, _ := e2eutil.RoleRules(role)
		for _, r := range rules {
			if !slices.ContainsFunc(r.Verbs, func(v string) bool { return slices.Contains(writeVerbs, v) }) {
				continue
			}
			for _, group := range r.APIGroups {
				for _, resource := range r.Resources {
					key := group + "/" + resource
					if !slices.Contains(writesLeftToRBAC, key) && !pinned(group, resource) {
						findings = append(findings, fmt.Sprintf("%s grants %q on %s, which the policy does not pin", role.GetKind(), r.Verbs, key))
					}
				}
			}
		}
	}
	return findings
}

// ungateHookFindings lists what the uninstall hook's objects grant or run beyond what it needs: its
// ClusterRole may list and patch pods and nothing else, bound to its own ServiceAccount alone, and its
// Job's pod runs restricted, as the Deployment's does.
func ungateHookFindings(t *testing.T, obj *unstructured.Unstructured) []string {
	t.Helper()
	const account = "wincompat-ungate"
	switch obj.GetKind() {
	case "ClusterRole":
		rules, err := e2eutil.RoleRules(obj)
		if err != nil {
			return []string{err.Error()}
		}
		want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "patch"}}}
		if !equality.Semantic.DeepEqual(rules, want) {
			return []string{fmt.Sprintf("the uninstall hook's ClusterRole grants %+v, want %+v", rules, want)}
		}
	case "ClusterRoleBinding":
		return bindingFindings(obj, account, e2eutil.OwnNamespace)
	case "Job":
		var job batchv1.Job
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &job); err != nil {
			return []string{err.Error()}
		}
		var findings []string
		if job.Spec.Template.Spec.ServiceAccountName != account {
			findings = append(findings, "the uninstall hook runs as "+job.Spec.Template.Spec.ServiceAccountName)
		}
		for _, f := range podFindings(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: job.Spec.Template}}, "") {
			findings = append(findings, "the uninstall hook's pod: "+f)
		}
		return findings
	}
	return nil
}

// podFindings lists what the chart's pod does beyond the restricted profile wincompat promises: every
// container non-root, read-only root filesystem, no privilege escalation, all capabilities dropped and
// none added, seccomp RuntimeDefault, nothing from the host; and the webhook's TLS floor and HTTP/1.1.
func podFindings(d *appsv1.Deployment, wantMinTLS string) []string {
	var findings []string
	spec := d.Spec.Template.Spec
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		findings = append(findings, "the pod shares a host namespace")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			findings = append(findings, "volume "+v.Name+" mounts a host path")
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		say := func(format string, args ...any) {
			findings = append(findings, "container "+c.Name+": "+fmt.Sprintf(format, args...))
		}
		if nonRoot := cmpOr(sc.RunAsNonRoot, psc.RunAsNonRoot); nonRoot == nil || !*nonRoot {
			say("runAsNonRoot is not true")
		}
		if user := cmpOr(sc.RunAsUser, psc.RunAsUser); user != nil && *user == 0 {
			say("runs as uid 0")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			say("the root filesystem is writable")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			say("allowPrivilegeEscalation is not false")
		}
		if sc.Privileged != nil && *sc.Privileged {
			say("privileged")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			say("does not drop ALL capabilities")
		} else if len(sc.Capabilities.Add) > 0 {
			say("adds capabilities %q", sc.Capabilities.Add)
		}
		if profile := cmpOr(sc.SeccompProfile, psc.SeccompProfile); profile == nil || profile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			say("seccomp profile is not RuntimeDefault")
		}
		if c.Name != "wincompat" {
			continue
		}
		if !slices.Contains(c.Args, "serve") {
			say("does not run `wincompat serve`: %q", c.Args)
		}
		if !slices.Contains(c.Args, "--tls-min-version="+wantMinTLS) {
			say("TLS floor is not %s: %q", wantMinTLS, c.Args)
		}
		for _, a := range c.Args {
			if a == "--enable-http2" || a == "--enable-http2=true" {
				say("turns HTTP/2 on")
			}
		}
	}
	return findings
}

func cmpOr[T any](own, pod *T) *T {
	if own != nil {
		return own
	}
	return pod
}

// dockerfileFindings lists what the Dockerfile's final stage does beyond a static binary on a
// distroless base, run as a non-root user.
func dockerfileFindings(dockerfile string) []string {
	var final []string
	cgoOff := false
	for _, line := range strings.Split(dockerfile, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if strings.EqualFold(fields[0], "FROM") {
			final = nil
		}
		if strings.EqualFold(fields[0], "RUN") && strings.Contains(line, "CGO_ENABLED=0") && strings.Contains(line, "go build") {
			cgoOff = true
		}
		final = append(final, line)
	}
	var findings []string
	if !cgoOff {
		findings = append(findings, "the binary is not built with CGO_ENABLED=0, so it may not be static")
	}
	if len(final) == 0 {
		return append(findings, "no FROM")
	}
	if base := strings.Fields(final[0]); len(base) < 2 || !strings.HasPrefix(base[1], "gcr.io/distroless/static") {
		findings = append(findings, "the final stage is not distroless static: "+final[0])
	}
	user := ""
	for _, line := range final[1:] {
		fields := strings.Fields(line)
		switch strings.ToUpper(fields[0]) {
		case "USER":
			if len(fields) > 1 {
				user = fields[1]
			}
		case "RUN":
			findings = append(findings, "the final stage runs a command, so its base has a shell: "+line)
		}
	}
	name, group, _ := strings.Cut(user, ":")
	switch {
	case user == "":
		findings = append(findings, "the final stage sets no USER, so it runs as the base image's user")
	case name == "root" || name == "0" || group == "root" || group == "0":
		findings = append(findings, "the final stage runs as "+user)
	case strings.Trim(name, "0123456789") != "":
		// A name is resolved inside the image; the kubelet's runAsNonRoot check needs a number.
		findings = append(findings, "USER "+user+" is not numeric, so runAsNonRoot cannot verify it")
	}
	return findings
}

// chartValues are the value sets whose RBAC and pod differ: TLS mode and RuntimeClass management add
// rules, and nonDefaultValues turns on everything the defaults leave off.
var chartValues = []struct{ name, values, minTLS string }{
	{"default values", "", "1.3"},
	{"self-managed TLS", "tls: {mode: self-managed}\n", "1.3"},
	{"RuntimeClasses unmanaged", "runtimeClasses: {manage: false}\n", "1.3"},
	{"engine hybrid with self-managed TLS", "engine: hybrid\ntls: {mode: self-managed}\n", "1.3"},
	{"non-default values", e2eutil.NonDefaultValues, "1.2"},
	{"misplaced pods not watched", "misplacedPods: {watch: false}\n", "1.3"},
}

// TestChartSecurity: issue 8. The chart's RBAC is exactly what wincompat needs (every rule listed in
// the output), its bindings give it only to wincompat's ServiceAccount, and its pod runs restricted:
// non-root, read-only, no privilege escalation, no capabilities, seccomp RuntimeDefault. Then each
// checker is shown a broken input and must object.
func TestChartSecurity(t *testing.T) {
	for _, tc := range chartValues {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.values != "" {
				file = filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(file, []byte(tc.values), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[string]int{}
			objs := e2eutil.RenderChart(t, file)
			for _, f := range ownWritesFindings(objs, "system:serviceaccount:"+e2eutil.OwnNamespace+":wincompat") {
				t.Error(f)
			}
			hooks := map[string]int{}
			for _, obj := range objs {
				if _, hook := obj.GetAnnotations()["helm.sh/hook"]; hook {
					hooks[obj.GetKind()]++
					for _, f := range ungateHookFindings(t, obj) {
						t.Error(f)
					}
					continue
				}
				seen[obj.GetKind()]++
				switch obj.GetKind() {
				case "ClusterRole", "Role":
					e2eutil.CheckRBAC(t, obj)
				case "ClusterRoleBinding", "RoleBinding":
					for _, f := range bindingFindings(obj, "wincompat", e2eutil.OwnNamespace) {
						t.Error(f)
					}
				case "Deployment":
					for _, f := range podFindings(e2eutil.DeploymentOf(t, obj), tc.minTLS) {
						t.Error(f)
					}
				}
			}
			for _, kind := range []string{"ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "Deployment", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
				if seen[kind] != 1 {
					t.Errorf("%d %s rendered, want 1: the checks above saw the wrong objects", seen[kind], kind)
				}
			}
			if want := map[string]int{"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Job": 1}; !maps.Equal(hooks, want) {
				t.Errorf("hooks rendered %v, want the uninstall hook's %v", hooks, want)
			}
		})
	}

	objs := e2eutil.RenderChart(t, "")
	find := func(kind string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind {
				return o.DeepCopy()
			}
		}
		t.Fatalf("no %s rendered", kind)
		return nil
	}
	t.Run("RBAC checker catches", func(t *testing.T) {
		for _, tc := range []struct {
			kind string
			rule map[string]any
		}{
			{"ClusterRole", map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get"}}},
			{"ClusterRole", map[string]any{"apiGroups": []any{"rbac.authorization.k8s.io"}, "resources": []any{"clusterroles"}, "verbs": []any{"escalate", "bind"}}},
			{"ClusterRole", map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}},
			{"ClusterRole", map[string]any{"apiGroups": []any{""}, "resources": []any{"namespaces"}, "verbs": []any{"update"}}},
			{"ClusterRole", map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"update", "patch"}}},
			{"ClusterRole", map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"deletecollection"}}},
			{"ClusterRole", map[string]any{"apiGroups": []any{"node.k8s.io"}, "resources": []any{"runtimeclasses"}, "verbs": []any{"delete"}}},
			{"ClusterRole", map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}},
			// Its own pin on its writes is out of its reach.
			{"ClusterRole", map[string]any{"apiGroups": []any{"admissionregistration.k8s.io"}, "resources": []any{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, "verbs": []any{"patch", "delete"}}},
			{"Role", map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"list"}}},
			{"Role", map[string]any{"apiGroups": []any{""}, "resources": []any{"pods/exec"}, "verbs": []any{"create"}}},
			{"Role", map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "verbs": []any{"deletecollection"}}},
		} {
			role := find(tc.kind)
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			if err := unstructured.SetNestedSlice(role.Object, append(rules, tc.rule), "rules"); err != nil {
				t.Fatal(err)
			}
			if len(e2eutil.RBACFindings(role)) == 0 {
				t.Errorf("%s with %v passed", tc.kind, tc.rule)
			}
		}
		binding := find("ClusterRoleBinding")
		_ = unstructured.SetNestedField(binding.Object, "cluster-admin", "roleRef", "name")
		if len(bindingFindings(binding, "wincompat", e2eutil.OwnNamespace)) == 0 {
			t.Error("a binding to cluster-admin passed")
		}
		binding = find("RoleBinding")
		_ = unstructured.SetNestedSlice(binding.Object, []any{map[string]any{"kind": "Group", "name": "system:authenticated"}}, "subjects")
		if len(bindingFindings(binding, "wincompat", e2eutil.OwnNamespace)) == 0 {
			t.Error("a binding to every authenticated user passed")
		}
	})
	t.Run("own-writes checker catches", func(t *testing.T) {
		user := "system:serviceaccount:" + e2eutil.OwnNamespace + ":wincompat"
		hybrid := e2eutil.RenderChart(t, e2eutil.ValuesFile(t, "engine: hybrid\ntls: {mode: self-managed}\n"))
		if f := ownWritesFindings(hybrid, user); len(f) > 0 {
			t.Fatalf("the unbroken chart: %q", f)
		}
		for name, breakIt := range map[string]func(kind string, obj map[string]any) map[string]any{
			"no binding": func(kind string, obj map[string]any) map[string]any {
				if kind == "ValidatingAdmissionPolicyBinding" {
					return nil
				}
				return obj
			},
			"another user": func(kind string, obj map[string]any) map[string]any {
				if kind == "ValidatingAdmissionPolicy" {
					_ = unstructured.SetNestedSlice(obj, []any{map[string]any{"name": "u", "expression": "request.userInfo.username == 'someone'"}}, "spec", "matchConditions")
				}
				return obj
			},
			"a second condition": func(kind string, obj map[string]any) map[string]any {
				if kind == "ValidatingAdmissionPolicy" {
					conds, _, _ := unstructured.NestedSlice(obj, "spec", "matchConditions")
					_ = unstructured.SetNestedSlice(obj, append(conds, map[string]any{"name": "never", "expression": "false"}), "spec", "matchConditions")
				}
				return obj
			},
			"failing open": func(kind string, obj map[string]any) map[string]any {
				if kind == "ValidatingAdmissionPolicy" {
					_ = unstructured.SetNestedField(obj, "Ignore", "spec", "failurePolicy")
				}
				return obj
			},
			"audit only": func(kind string, obj map[string]any) map[string]any {
				if kind == "ValidatingAdmissionPolicyBinding" {
					_ = unstructured.SetNestedSlice(obj, []any{"Audit"}, "spec", "validationActions")
				}
				return obj
			},
			"Secrets not matched": func(kind string, obj map[string]any) map[string]any {
				if kind == "ValidatingAdmissionPolicy" {
					rules, _, _ := unstructured.NestedSlice(obj, "spec", "matchConstraints", "resourceRules")
					_ = unstructured.SetNestedSlice(obj, rules[:len(rules)-1], "spec", "matchConstraints", "resourceRules")
				}
				return obj
			},
			"v1 only": func(kind string, obj map[string]any) map[string]any {
				if kind == "ValidatingAdmissionPolicy" {
					rules, _, _ := unstructured.NestedSlice(obj, "spec", "matchConstraints", "resourceRules")
					rules[0].(map[string]any)["apiVersions"] = []any{"v1"}
					_ = unstructured.SetNestedSlice(obj, rules, "spec", "matchConstraints", "resourceRules")
				}
				return obj
			},
			"pod writes without the pin": func(kind string, obj map[string]any) map[string]any {
				if kind == "ValidatingAdmissionPolicy" {
					rules, _, _ := unstructured.NestedSlice(obj, "spec", "matchConstraints", "resourceRules")
					kept := slices.DeleteFunc(rules, func(r any) bool { return slices.Contains(r.(map[string]any)["resources"].([]any), any("pods")) })
					_ = unstructured.SetNestedSlice(obj, kept, "spec", "matchConstraints", "resourceRules")
				}
				if kind == "ClusterRole" {
					rules, _, _ := unstructured.NestedSlice(obj, "rules")
					_ = unstructured.SetNestedSlice(obj, append(rules, map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"delete"}}), "rules")
				}
				return obj
			},
			"admission policies writable again": func(kind string, obj map[string]any) map[string]any {
				if kind == "ClusterRole" {
					rules, _, _ := unstructured.NestedSlice(obj, "rules")
					_ = unstructured.SetNestedSlice(obj, append(rules, map[string]any{"apiGroups": []any{"admissionregistration.k8s.io"}, "resources": []any{"mutatingadmissionpolicies"}, "verbs": []any{"create"}}), "rules")
				}
				return obj
			},
			"a new write left unpinned": func(kind string, obj map[string]any) map[string]any {
				if kind == "ClusterRole" {
					rules, _, _ := unstructured.NestedSlice(obj, "rules")
					_ = unstructured.SetNestedSlice(obj, append(rules, map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"daemonsets"}, "verbs": []any{"patch"}}), "rules")
				}
				return obj
			},
		} {
			var broken []*unstructured.Unstructured
			for _, o := range hybrid {
				if obj := breakIt(o.GetKind(), o.DeepCopy().Object); obj != nil {
					broken = append(broken, &unstructured.Unstructured{Object: obj})
				}
			}
			if len(ownWritesFindings(broken, user)) == 0 {
				t.Errorf("%s passed", name)
			}
		}
	})
	t.Run("pod checker catches", func(t *testing.T) {
		for name, breakIt := range map[string]func(*appsv1.Deployment){
			"root user":        func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.RunAsUser = new(int64(0)) },
			"runAsNonRoot off": func(d *appsv1.Deployment) { d.Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil },
			"writable root": func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = new(false)
			},
			"escalation unset": func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
			},
			"privileged":        func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = new(true) },
			"capabilities kept": func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Drop = nil },
			"capability added": func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
			},
			"seccomp unconfined": func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
			},
			"host network":  func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true },
			"TLS 1.2 floor": func(d *appsv1.Deployment) { replaceArg(d, "--tls-min-version=1.3", "--tls-min-version=1.2") },
			"HTTP/2 on": func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "--enable-http2")
			},
			"an unhardened sidecar": func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar"})
			},
			"host path": func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			},
			"init container as root": func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{RunAsUser: new(int64(0))}}}
			},
		} {
			d := e2eutil.DeploymentOf(t, find("Deployment"))
			breakIt(d)
			if len(podFindings(d, "1.3")) == 0 {
				t.Errorf("%s passed", name)
			}
		}
	})
}

func replaceArg(d *appsv1.Deployment, from, to string) {
	args := d.Spec.Template.Spec.Containers[0].Args
	if i := slices.Index(args, from); i >= 0 {
		args[i] = to
	}
}

// TestDockerfileSecurity: the image is a static binary on distroless, run as a non-root numeric user;
// then the checker is shown broken Dockerfiles and must object.
func TestDockerfileSecurity(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(data)
	for _, f := range dockerfileFindings(dockerfile) {
		t.Error(f)
	}
	userLine := ""
	for _, line := range strings.Split(dockerfile, "\n") {
		if strings.HasPrefix(line, "USER ") {
			userLine = line
		}
	}
	if userLine == "" {
		t.Fatal("no USER line to break")
	}
	finalFrom := ""
	for _, line := range strings.Split(dockerfile, "\n") {
		if strings.HasPrefix(line, "FROM ") {
			finalFrom = line
		}
	}
	for name, broken := range map[string]string{
		"no USER":            strings.Replace(dockerfile, userLine+"\n", "", 1),
		"USER root":          strings.Replace(dockerfile, userLine, "USER root", 1),
		"USER 0:0":           strings.Replace(dockerfile, userLine, "USER 0:0", 1),
		"USER by name":       strings.Replace(dockerfile, userLine, "USER nonroot", 1),
		"a base with shell":  strings.Replace(dockerfile, finalFrom, "FROM debian:12", 1),
		"RUN in final stage": dockerfile + "RUN chmod 777 /wincompat\n",
		"cgo on":             strings.Replace(dockerfile, "CGO_ENABLED=0", "CGO_ENABLED=1", 1),
		"USER in build only": strings.Replace(strings.Replace(dockerfile, userLine+"\n", "", 1), "WORKDIR /src", "WORKDIR /src\nUSER 65532", 1),
	} {
		if broken == dockerfile {
			t.Fatalf("%s: the test did not change the Dockerfile", name)
		}
		if len(dockerfileFindings(broken)) == 0 {
			t.Errorf("%s passed:\n%s", name, broken)
		}
	}
}

// tlsFindings dials wincompat's webhook port and lists what it accepts beyond `wincompat serve`'s
// defaults: a client that stops at TLS 1.2, and HTTP/2.
func tlsFindings(t *testing.T, addr string, base *tls.Config) []string {
	t.Helper()
	dial := func(mutate func(*tls.Config)) (*tls.Conn, error) {
		cfg := base.Clone()
		mutate(cfg)
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		return conn.(*tls.Conn), nil
	}
	var findings []string
	if conn, err := dial(func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }); err == nil {
		findings = append(findings, "a TLS 1.2-max client completed the handshake, negotiating "+tls.VersionName(conn.ConnectionState().Version))
		conn.Close()
	} else {
		t.Logf("TLS 1.2-max client refused: %v", err)
	}
	if conn, err := dial(func(c *tls.Config) { c.NextProtos = []string{"h2"} }); err == nil {
		if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
			findings = append(findings, "HTTP/2 negotiated")
		}
		conn.Close()
	} else {
		t.Logf("h2-only client refused: %v", err)
	}
	return findings
}
