package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook/scheduling/runtimeclass"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestPolicyCannotTakeAdmissionDown: issue 15, parts 3 and 4. wincompat is installed as a user installs
// it (helm install of the chart, self-managed TLS, the engine the API server allows) and runs as the
// chart's ServiceAccount under the chart's RBAC, never as an administrator. Then:
//   - an invalid policy is refused by helm upgrade, server-side apply and the strategic merge patch
//     `kubectl apply` sends, each with the loader's message naming the key (a typo'd key in helm's
//     values already by the chart's schema, before anything is sent);
//   - with no replica, a policy edit is refused too (failurePolicy Fail, scoped to that one ConfigMap);
//   - a replica that starts while the stored policy is invalid (written past the check) serves with
//     the last good policy it kept in the API server, is ready, and says so in the log, the metrics and
//     an Event; fixing the policy takes effect without a restart.
//
// The only change to what the chart renders is the network path: a post-renderer points the webhooks'
// clientConfig at the replica's loopback port, as a Service would route to its pod.
func TestPolicyCannotTakeAdmissionDown(t *testing.T) {
	ctx := context.Background()
	// The API server records every request of wincompat's ServiceAccount, to hold them against the
	// chart's rules at the end.
	auditPolicy, auditLog := filepath.Join(t.TempDir(), "audit-policy.yaml"), filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(auditPolicy, []byte(serviceAccountAudit), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := controlplane.LaunchBare(t,
		controlplane.WithAPIServerFlag("audit-policy-file", auditPolicy),
		controlplane.WithAPIServerFlag("audit-log-path", auditLog),
		controlplane.WithAPIServerFlag("audit-log-format", "json"),
		controlplane.WithAPIServerFlag("audit-log-maxsize", "1024"))
	e2eutil.RequireAdmissionPolicies(t, cp.Config) // it installs the chart with engine hybrid
	cl := &e2eutil.Cluster{CP: cp, Cfg: cp.Config, C: cp.Client}
	c := cp.Client
	e2eutil.SetUpNamespace(ctx, t, c, e2eutil.OwnNamespace, nil, nil)

	rel := e2eutil.NewChartRelease(t, cl)
	release := func(extra ...string) (string, error) {
		return rel.Upgrade(append([]string{"--set", "tls.mode=self-managed", "--set", "imageResolver.enabled=false"}, extra...)...)
	}
	// RuntimeClasses of the catalog's names as a cluster may already have them: one not wincompat's (left
	// alone, with an Event in default), one of wincompat's with the wrong scheduling (repaired), one of
	// wincompat's with another handler (replaced: deleted and created).
	managed := map[string]string{runtimeclass.ManagedByLabel: runtimeclass.ManagedByValue}
	for _, rc := range []*nodev1.RuntimeClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "windows-2019"}, Handler: "runhcs-wcow-process"},
		{ObjectMeta: metav1.ObjectMeta{Name: "windows-2022", Labels: managed}, Handler: "runhcs-wcow-process"},
		{ObjectMeta: metav1.ObjectMeta{Name: "windows-2025", Labels: managed}, Handler: "runhcs-wcow-hypervisor"},
	} {
		e2eutil.Create(ctx, t, c, rc)
	}
	if out, err := release(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}

	// The replica runs the chart's Deployment's arguments, with loopback ports, the policy ConfigMap as
	// a file (written here, as the kubelet would) and the ServiceAccount's identity.
	syncPolicyFile := rel.SyncPolicyFile
	syncPolicyFile()
	r := rel.Replica()
	r.Start(t)
	r.WaitReady(t)

	// What the ServiceAccount's rules are for, seen done: the caBundle of both configurations, the last
	// good policy and the catalog's RuntimeClasses; and the chart's ten admission policies (engine hybrid).
	e2eutil.WaitUntil(t, 30*time.Second, "wincompat to set the caBundle of both webhook configurations", func() bool {
		var m admissionregistrationv1.MutatingWebhookConfiguration
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		return c.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, &m) == nil && len(m.Webhooks[0].ClientConfig.CABundle) > 0 &&
			c.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, &v) == nil && len(v.Webhooks[0].ClientConfig.CABundle) > 0
	})
	keptIs := func(what, want string) {
		t.Helper()
		e2eutil.WaitUntil(t, 30*time.Second, what, func() bool { return e2eutil.PolicyConfigMap(t, c, "wincompat-policy-last-good") == want })
	}
	keptIs("the installed policy kept as the last good one", e2eutil.PolicyConfigMap(t, c, "wincompat-policy"))
	e2eutil.WaitUntil(t, 30*time.Second, "the admission policies and RuntimeClasses", func() bool {
		var maps admissionregistrationv1.MutatingAdmissionPolicyList
		var rcs nodev1.RuntimeClassList
		return c.List(ctx, &maps) == nil && len(maps.Items) == len(admissionpolicy.Names()) && c.List(ctx, &rcs) == nil && len(rcs.Items) >= 2
	})

	// A pod left behind wincompat's gate where no webhook of wincompat's sees it (a namespace not opted
	// in): the leader reads it and releases it, through the pods rule.
	e2eutil.SetUpNamespace(ctx, t, c, "elsewhere", nil, nil)
	gated := e2eutil.WindowsPod("elsewhere", "gated")
	gated.Labels = map[string]string{policy.LabelGated: "true"}
	gated.Spec.SecurityContext = nil // no wincompat strips it there
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: policy.SchedulingGate}}
	if err := c.Create(ctx, gated); err != nil {
		t.Fatal(err)
	}
	e2eutil.WaitUntil(t, 30*time.Second, "the leader to release a pod gated outside opted-in namespaces", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(gated), gated) == nil && !policy.Gated(gated)
	})

	// A valid change through helm upgrade: kept once loaded.
	const lastGoodTaint = "e2e.wincompat.io/last-good"
	taints := `policy.windowsNodeTaints=[{"key":"os","value":"windows","effect":"NoSchedule"},{"key":"` + lastGoodTaint + `","value":"yes","effect":"NoSchedule"}]`
	if out, err := release("--set-json", taints); err != nil {
		t.Fatalf("helm upgrade with a valid policy: %v\n%s", err, out)
	}
	good := syncPolicyFile()
	if !strings.Contains(good, lastGoodTaint) {
		t.Fatalf("the upgraded policy lacks the new taint:\n%s", good)
	}
	keptIs("the upgraded policy kept as the last good one", good)

	// An invalid policy, three ways: refused before it is stored, with the key named.
	refused := func(how string, err error, says ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: an invalid policy was stored", how)
			return
		}
		for _, s := range append(says, `denied the request`, "is not a valid policy") {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: the refusal does not say %q: %v", how, s, err)
			}
		}
		t.Logf("%s: %v", how, err)
	}
	// A typo'd key never reaches the API server: the chart refuses it (TestHelmChartValues).
	if out, err := release("--set-json", taints, "--set", "policy.windowsNodeTaint=os"); err == nil ||
		!strings.Contains(out, "unknown key policy.windowsNodeTaint: did you mean policy.windowsNodeTaints?") {
		t.Errorf("helm upgrade with a typo'd policy key: %v\n%s", err, out)
	}
	// What the chart leaves to the policy (a name given to two builds) is refused by the policy check.
	twoBuilds := `policy.builds=[{"build":"10.0.20348","names":["ltsc2022","prod"]},{"build":"10.0.26100","names":["prod"]}]`
	if out, err := release("--set-json", taints, "--set-json", twoBuilds); err != nil {
		refused("helm upgrade", fmt.Errorf("%v: %s", err, out), "builds[1].names[0]", "also names build 10.0.20348")
	} else {
		refused("helm upgrade", nil)
	}
	invalid := strings.Replace(good, "kind: Policy\n", "kind: Policy\narch: sparc\n", 1)
	apply := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: e2eutil.OwnNamespace, Name: "wincompat-policy"}, Data: map[string]string{"policy.yaml": invalid}}
	//nolint:staticcheck // server-side apply of a typed object, as kubectl apply --server-side sends it.
	refused("server-side apply", c.Patch(ctx, apply, client.Apply, client.FieldOwner("gitops"), client.ForceOwnership), "arch")
	smp := fmt.Sprintf(`{"data":{"policy.yaml":%q}}`, strings.Replace(good, "kind: Policy\n", "kind: Policy\nbuilds: none\n", 1))
	refused("kubectl apply (strategic merge patch)", c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e2eutil.OwnNamespace, Name: "wincompat-policy"}},
		client.RawPatch(types.StrategicMergePatchType, []byte(smp))), "builds")
	if got := e2eutil.PolicyConfigMap(t, c, "wincompat-policy"); got != good {
		t.Errorf("the stored policy changed:\n%s", got)
	}

	// No replica: a policy edit is refused (it cannot be checked), nothing else is affected.
	if err := r.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	stored := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: e2eutil.OwnNamespace, Name: "wincompat-policy"}, stored); err != nil {
		t.Fatal(err)
	}
	stored.Data["policy.yaml"] = invalid
	if err := c.Update(ctx, stored); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("with no replica, a policy edit was not refused by the webhook: %v", err)
	}

	// Somehow an invalid policy is stored anyway (here: an administrator removes the check for a moment)
	// and a replica starts with it.
	var check admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, &check); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &check); err != nil {
		t.Fatal(err)
	}
	// The API server drops a deleted webhook from its admission chain when its informer sees the
	// deletion, a moment later: until then the update still calls the stopped replica.
	var updateErr error
	e2eutil.Eventually(t, "the policy update is admitted once the check is deleted", func() bool {
		updateErr = c.Update(ctx, stored.DeepCopy())
		return updateErr == nil || !strings.Contains(updateErr.Error(), "failed calling webhook")
	})
	if updateErr != nil {
		t.Fatal(updateErr)
	}
	check.ResourceVersion, check.UID, check.ManagedFields = "", "", nil
	if err := c.Create(ctx, &check); err != nil {
		t.Fatal(err)
	}
	syncPolicyFile()
	r.Start(t)
	r.WaitReady(t)
	if line := r.LogLine(t, "the policy file is invalid; serving with the last-good policy until it is fixed"); line == nil || !strings.Contains(fmt.Sprint(line["error"]), "arch") {
		t.Errorf("no log line says the policy is invalid and which policy serves instead: %v\n%s", line, r.LogTail())
	}
	if got := r.Metric(t, "wincompat_policy_source", "source", "last-good"); got != 1 {
		t.Errorf("wincompat_policy_source{source=last-good} = %v, want 1", got)
	}
	if got := r.Metric(t, "wincompat_policy_valid", "", ""); got != 0 {
		t.Errorf("wincompat_policy_valid = %v, want 0", got)
	}
	e2eutil.WaitUntil(t, 20*time.Second, "an Event on the policy ConfigMap", func() bool {
		var events eventsv1.EventList
		if c.List(ctx, &events, client.InNamespace(e2eutil.OwnNamespace)) != nil {
			return false
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == "wincompat-policy" && e.Reason == "PolicyInvalid" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, "last-good") {
				return true
			}
		}
		return false
	})
	// It serves with the last good policy: its own taint is tolerated.
	e2eutil.SetUpNamespace(ctx, t, c, "apps", map[string]string{policy.LabelEnabled: "true"}, nil)
	pod := e2eutil.WindowsPod("apps", "after-restart")
	if err := c.Create(ctx, pod); err != nil {
		t.Fatalf("a Windows pod with the last good policy in force: %v", err)
	}
	if e2eutil.CountToleration(pod, corev1.Toleration{Key: lastGoodTaint, Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}) != 1 {
		t.Errorf("the pod does not tolerate the last good policy's taint: %+v", pod.Spec.Tolerations)
	}
	if got := e2eutil.PolicyConfigMap(t, c, "wincompat-policy-last-good"); got != good {
		t.Errorf("the invalid policy replaced the kept one:\n%s", got)
	}

	// Fixed: in force at the next poll, no restart.
	if err := c.Get(ctx, client.ObjectKeyFromObject(stored), stored); err != nil {
		t.Fatal(err)
	}
	stored.Data["policy.yaml"] = good
	if err := c.Update(ctx, stored); err != nil {
		t.Fatalf("fixing the policy: %v", err)
	}
	syncPolicyFile()
	e2eutil.WaitUntil(t, 15*time.Second, "the fixed policy in force", func() bool {
		return r.Metric(t, "wincompat_policy_source", "source", "file") == 1 && r.Metric(t, "wincompat_policy_valid", "", "") == 1
	})
	e2eutil.WaitUntil(t, 30*time.Second, "the RuntimeClasses repaired and replaced", func() bool {
		var rcs nodev1.RuntimeClassList
		if c.List(ctx, &rcs) != nil {
			return false
		}
		done := 0
		for _, rc := range rcs.Items {
			if (rc.Name == "windows-2022" && rc.Scheduling != nil) || (rc.Name == "windows-2025" && rc.Handler == "runhcs-wcow-process") {
				done++
			}
		}
		return done == 2
	})
	if err := r.Stop(10 * time.Second); err != nil {
		t.Error(err)
	}
	checkRulesNeeded(t, c, auditLog)
	logs, _ := filepath.Glob(filepath.Join(r.WorkDir, "*.log"))
	for _, file := range logs {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if forbidden.MatchString(line) {
				t.Errorf("the chart's RBAC refused wincompat something: %s", line)
			}
		}
	}
}

// serviceAccountAudit records the metadata of every request of wincompat's ServiceAccount, nothing else.
const serviceAccountAudit = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["system:serviceaccount:` + e2eutil.OwnNamespace + `:wincompat"]
- level: None
`

// checkRulesNeeded holds wincompat's requests, from the audit log, against the rules of the chart's
// ClusterRole and Role as installed: none may have been refused, and every rule must be the only one
// that allowed some request, so that removing any rule makes that request forbidden and this test fail.
func checkRulesNeeded(t *testing.T, c client.Client, auditLog string) {
	t.Helper()
	type grant struct {
		role string
		rbacv1.PolicyRule
	}
	var grants []grant
	var cr rbacv1.ClusterRole
	var role rbacv1.Role
	if err := c.Get(context.Background(), client.ObjectKey{Name: "wincompat"}, &cr); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: e2eutil.OwnNamespace, Name: "wincompat"}, &role); err != nil {
		t.Fatal(err)
	}
	for _, r := range cr.Rules {
		grants = append(grants, grant{"ClusterRole", r})
	}
	for _, r := range role.Rules {
		grants = append(grants, grant{"Role", r})
	}
	data, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	needed := make([]string, len(grants)) // a request only this rule allowed
	requests := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct {
			Verb           string `json:"verb"`
			RequestURI     string `json:"requestURI"`
			ObjectRef      *struct{ Resource, Subresource, Namespace, Name, APIGroup string }
			ResponseStatus *struct{ Code int }
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		requests++
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403 {
			t.Errorf("the chart's RBAC refused wincompat %s %s", ev.Verb, ev.RequestURI)
		}
		if ev.ObjectRef == nil {
			continue // discovery and other non-resource URLs: every authenticated user may
		}
		resource := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			resource += "/" + ev.ObjectRef.Subresource
		}
		verbs := []string{ev.Verb}
		if (ev.Verb == "patch" || ev.Verb == "update") && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 201 {
			// It created the object (server-side apply of a new one): the API server also authorized
			// create, which the audit log does not record apart.
			verbs = append(verbs, "create")
		}
		for _, verb := range verbs {
			var allowedBy []int
			for i, g := range grants {
				if (g.role == "Role" && ev.ObjectRef.Namespace != e2eutil.OwnNamespace) ||
					!slices.Contains(g.APIGroups, ev.ObjectRef.APIGroup) || !slices.Contains(g.Resources, resource) || !slices.Contains(g.Verbs, verb) ||
					(len(g.ResourceNames) > 0 && !slices.Contains(g.ResourceNames, ev.ObjectRef.Name)) {
					continue
				}
				allowedBy = append(allowedBy, i)
			}
			if len(allowedBy) == 1 && needed[allowedBy[0]] == "" {
				needed[allowedBy[0]] = verb + " " + ev.RequestURI
			}
		}
	}
	for i, g := range grants {
		if needed[i] == "" {
			t.Errorf("%s rule %v %v %v %v allowed none of wincompat's %d requests alone: removing it would fail nothing here", g.role, g.APIGroups, g.Resources, g.ResourceNames, g.Verbs, requests)
		} else {
			t.Logf("%s rule %v %v %v %v needed for: %s", g.role, g.APIGroups, g.Resources, g.ResourceNames, g.Verbs, needed[i])
		}
	}
}

var forbidden = regexp.MustCompile(`(?i)\bforbidden\b`)
