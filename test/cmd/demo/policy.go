package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/server"
)

// policyConfigMap is the ConfigMap the demo's policy file comes from, as the chart names it.
const policyConfigMap = "wincompat-policy"

const demoPolicy = "apiVersion: wincompat.io/v1alpha1\nkind: Policy\n"

// installPolicyCheck creates the ValidatingWebhookConfiguration of deploy/webhook with its clientConfig
// pointed at https://127.0.0.1:port<path>, and no caBundle: wincompat injects it.
func (d *demo) installPolicyCheck(ctx context.Context, manifest string, port int) error {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	var vc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &vc); err != nil {
		return fmt.Errorf("%s: %w", manifest, err)
	}
	for i := range vc.Webhooks {
		if err := toLoopback(&vc.Webhooks[i].ClientConfig, port); err != nil {
			return fmt.Errorf("%s: webhook %s: %w", manifest, vc.Webhooks[i].Name, err)
		}
	}
	if err := d.c.Create(ctx, &vc); err != nil {
		return fmt.Errorf("creating ValidatingWebhookConfiguration %s: %w", vc.Name, err)
	}
	return nil
}

// installAdmissionPolicies installs the admission policies of the demo's policy as the chart installs
// them for engine hybrid: the params, then each policy and its binding. wincompat writes none of them.
func (d *demo) installAdmissionPolicies(ctx context.Context) (int, error) {
	pol, err := policy.Load([]byte(demoPolicy))
	if err != nil {
		return 0, err
	}
	r := admissionpolicy.Render(pol, admissionpolicy.Options{Version: "demo", ExcludedNamespaces: []string{wincompatNamespace}, ParamsNamespace: wincompatNamespace})
	objs := []client.Object{&r.Params}
	for i := range r.Policies {
		objs = append(objs, &r.Policies[i], &r.Bindings[i])
	}
	for _, o := range objs {
		if err := d.c.Create(ctx, o); err != nil {
			return 0, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return len(r.Policies), nil
}

// createPolicyConfigMaps creates the policy ConfigMap, writes it where wincompat serve reads it (as the
// kubelet mounts it), and the empty ConfigMap wincompat keeps the last good policy in.
func (d *demo) createPolicyConfigMaps(ctx context.Context) error {
	for name, data := range map[string]map[string]string{
		policyConfigMap:                         {webhook.PolicyKey: demoPolicy},
		policyConfigMap + server.LastGoodSuffix: nil,
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: wincompatNamespace}, Data: data}
		if err := d.c.Create(ctx, cm); err != nil {
			return fmt.Errorf("creating ConfigMap %s: %w", name, err)
		}
	}
	d.policyFile = filepath.Join(d.work, "policy.yaml")
	return os.WriteFile(d.policyFile, []byte(demoPolicy), 0o600)
}

// policyGuard shows that the policy cannot take admission down: an invalid policy is refused when it is
// applied, and a replica that starts with an invalid stored policy serves with the last good one.
func (d *demo) policyGuard(ctx context.Context) error {
	d.section("A policy that cannot take admission down: the policy check and the last good policy")
	lastGood := client.ObjectKey{Namespace: wincompatNamespace, Name: policyConfigMap + server.LastGoodSuffix}
	err := d.poll(ctx, 15*time.Second, func() (bool, error) {
		var cm corev1.ConfigMap
		if err := d.c.Get(ctx, lastGood, &cm); err != nil {
			return false, err
		}
		return cm.Data[webhook.PolicyKey] == demoPolicy, nil
	})
	if err != nil {
		return fmt.Errorf("wincompat did not keep the policy in force in %s: %w", lastGood, err)
	}
	d.detail("wincompat keeps the policy in force in ConfigMap %s (it loaded; replicas starting later can fall back to it)", lastGood.Name)

	const invalid = demoPolicy + "windowsNodeTaint:\n- {key: os, value: windows, effect: NoSchedule}\n"
	apply := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: policyConfigMap, Namespace: wincompatNamespace}, Data: map[string]string{webhook.PolicyKey: invalid}}
	//nolint:staticcheck // server-side apply of a typed object, as kubectl apply --server-side sends it.
	err = d.c.Patch(ctx, apply, client.Apply, client.FieldOwner("demo"), client.ForceOwnership)
	if err == nil {
		return fmt.Errorf("an invalid policy (windowsNodeTaint, a typo) was stored")
	}
	msg, _, _ := strings.Cut(err.Error(), " (known keys:")
	d.detail("server-side apply of a policy with a typo (windowsNodeTaint) is refused before it is stored:")
	d.detail("  %s", msg)
	_, why, found := strings.Cut(msg, "policy in force stays: ")
	if !found {
		why = msg
	}
	d.brief("a typo (windowsNodeTaint) applied server-side: refused by the policy check before it is stored: %s", why)

	// Somehow an invalid policy is stored anyway (here written straight into the mounted file), and a
	// replica restarts with it.
	if err := d.serve.stop(15 * time.Second); err != nil {
		return fmt.Errorf("stopping wincompat serve: %w", err)
	}
	if err := os.WriteFile(d.policyFile, []byte(invalid), 0o600); err != nil {
		return err
	}
	t := time.Now()
	logPath := filepath.Join(d.work, "wincompat-restarted.log")
	if d.serve, err = startProcess(d.wincompatBin, d.serveArgs, logPath); err != nil {
		return err
	}
	if err := d.poll(ctx, 30*time.Second, func() (bool, error) { return httpStatus(d.readyz) == "200 OK", d.serve.exitedEarly() }); err != nil {
		return fmt.Errorf("wincompat did not become ready with an invalid stored policy: %w", err)
	}
	d.detail("restarted with that invalid policy in its file (as if it had got past the check): ready after %.1fs", time.Since(t).Seconds())
	d.brief("wincompat restarted with that typo in its file: ready in %.1fs with the last good policy, kept in ConfigMap %s;",
		time.Since(t).Seconds(), lastGood.Name)
	if line := logLine(logPath, "the policy file is invalid; serving with the last-good policy until it is fixed"); line != "" {
		d.detail("  log:   %s", line)
	} else {
		return fmt.Errorf("wincompat did not log that it serves with the last good policy (log %s)", logPath)
	}
	err = d.poll(ctx, 15*time.Second, func() (bool, error) {
		var events eventsv1.EventList
		if err := d.c.List(ctx, &events, client.InNamespace(wincompatNamespace)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == policyConfigMap && e.Reason == "PolicyInvalid" {
				note, _, _ := strings.Cut(e.Note, " (known keys:")
				d.detail("  event: %s %s on ConfigMap %s: %s", e.Type, e.Reason, e.Regarding.Name, note)
				d.brief("  it says so in its log and a %s Event %s on ConfigMap %s", e.Type, e.Reason, e.Regarding.Name)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no PolicyInvalid Event on ConfigMap %s: %w", policyConfigMap, err)
	}
	// Mended: in force at the next poll of the file, without a restart.
	if err := os.WriteFile(d.policyFile, []byte(demoPolicy), 0o600); err != nil {
		return err
	}
	if err := d.poll(ctx, 15*time.Second, func() (bool, error) { return logLine(logPath, "policy reloaded") != "", nil }); err != nil {
		return fmt.Errorf("wincompat did not reload the mended policy: %w", err)
	}
	d.say("the file mended: wincompat reloaded it within its 5 s poll, no restart")
	return nil
}

// logLine returns "msg: error" of the first JSON log line of path whose msg is msg, or "".
func logLine(path, msg string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil || m["msg"] != msg {
			continue
		}
		line := msg
		if e, ok := m["error"].(string); ok {
			e, _, _ = strings.Cut(e, " (known keys:")
			line += ": " + e
		}
		return line
	}
	return ""
}
