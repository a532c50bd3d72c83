package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// Namespaces of the differential test, one per engine.
const (
	nsEngineWebhook = "engine-webhook"
	nsEngineHybrid  = "engine-hybrid"
	nsEngineMAP     = "engine-map"
)

// mapOnlyDifferences are the parts of an object the webhook sets and the admission policy alone does not
// (policy/admissionpolicy/README.md says why each stays with the webhook), by the path where the stored
// objects differ, with the path's variable parts (container names, list indexes) as "*".
var mapOnlyDifferences = map[string]string{
	"nodeSelector.node.kubernetes.io/windows-build": "the build: needs the cluster's nodes or the image's registry",
	"runtimeClassName":                                          "the RuntimeClass: needs the cluster's classes",
	"overhead":                                                  "set by the RuntimeClass admission plugin from the class the webhook chose",
	"affinity":                                                  "the build as node affinity (several candidate builds): needs the cluster",
	"tolerations":                                               "tolerations of the OS taints found on nodes, and the RuntimeClass's: need the cluster",
	"annotations.wincompat.io/build":                            "the build decision",
	"annotations.wincompat.io/build-source":                     "the build decision",
	"annotations.wincompat.io/version":                          "the webhook's marker (the admission policy writes wincompat.io/admission-policy)",
	"annotations.wincompat.io/admission-policy":                 "the admission policy's marker",
	"annotations.wincompat.io/changes":                          "the record holds the changes each engine made; warnings (the readiness checks') are the webhook's: an admission policy cannot warn",
	"annotations.wincompat.io/template-changes":                 "the record holds the changes each engine made; warnings (the readiness checks') are the webhook's: an admission policy cannot warn",
	"containers.*.securityContext.runAsNonRoot":                 "Pod Security restricted adjustments: need the namespace's labels",
	"initContainers.*.securityContext.runAsNonRoot":             "Pod Security restricted adjustments",
	"securityContext.runAsNonRoot":                              "Pod Security restricted adjustments",
	"containers.*.securityContext.allowPrivilegeEscalation":     "Pod Security restricted adjustments",
	"initContainers.*.securityContext.allowPrivilegeEscalation": "Pod Security restricted adjustments",
	"volumes.*.emptyDir.medium":                                 "the emptyDir Memory rewrite",
	"dnsPolicy":                                                 "the dnsPolicy rewrite",
	"schedulingGates":                                           "the scheduling gate: with no webhook to decide the build, the pod waits for the leader (the webhook removes the gate where it decides the build)",
	"labels.wincompat.io/gated":                                 "the scheduling gate's label, which the leader watches",
	"status.conditions":                                         "PodScheduled=False, reason SchedulingGated: the API server's mark of a pod stored gated",
}

// TestEnginesStoreTheSameObject: issue 15. Every corpus chart workload (declared Windows) and every
// golden case that needs no cluster facts is created three times in one API server: through the webhook
// alone, through hybrid (the admission policies, then the webhook) and through the admission policies
// alone. Hybrid must store exactly what the webhook alone stores, but for two differences: the record
// lists the admission policy's changes first (and, as CEL cannot render lists, says the old value of a
// list or an object was not kept), and the pod carries the admission policy's marker. What the
// admission policies alone store may differ from the webhook's only where mapOnlyDifferences says why.
// The policy is the default with the
// rewrites that narrow turned on (enginesPolicy), and pods those rewrites act on (narrowPods) must be
// stored by every engine as the Go decision says, also in a namespace enforcing Pod Security restricted.
// The webhook here reads no registry, so it gates nothing and removes the gate the admission policies
// add; the admission policies alone store Windows pods gated. TestEnginesGateAlike then restarts it
// reading a registry, for a pod the webhook gates (an image not answered in time) and one it does not.
func TestEnginesStoreTheSameObject(t *testing.T) {
	ctx := context.Background()
	cl := e2eutil.NewCluster(t)
	e2eutil.RequireAdmissionPolicies(t, cl.Cfg)
	workloads := e2eutil.Distinct(e2eutil.LoadCorpus(t))
	workloads = append(workloads, goldenWorkloads(t)...)
	workloads = append(workloads, narrowWorkloads(t)...)
	examples := e2eutil.LoadExamples(t)
	for _, ns := range []string{nsEngineWebhook, nsEngineHybrid, nsEngineMAP} {
		e2eutil.SetUpNamespace(ctx, t, cl.C, ns, map[string]string{policy.LabelEnabled: "true"}, append(slices.Clone(workloads), examples...))
	}
	restrictedLabels := map[string]string{policy.LabelEnabled: "true", policy.LabelPodSecurityEnforce: "restricted"}
	e2eutil.SetUpNamespace(ctx, t, cl.C, nsEngineMAPRestricted, restrictedLabels, nil)
	e2eutil.SetUpClusterWide(ctx, t, cl.C, append(slices.Clone(workloads), examples...))
	// As hybrid installs the webhook; the checks below see whether it acted.
	e2eutil.SetWebhookFailurePolicy(t, cl, admissionregistrationv1.Ignore)
	pol := enginesPolicy(t)
	e2eutil.InstallAdmissionPolicies(ctx, t, cl.C, admissionpolicy.Render(pol, admissionpolicy.Options{Version: "e2e", ExcludedNamespaces: []string{nsEngineWebhook}}))
	e2eutil.WaitForAdmissionPolicy(t, cl.C, nsEngineMAP)
	// The webhook leaves the admission-policy-only namespaces alone, as if no replica answered.
	served := *pol
	served.ExcludedNamespaces = append(append([]string{}, pol.ExcludedNamespaces...), nsEngineMAP, nsEngineMAPRestricted)
	cl.Serve(t, func(o *server.Options) { o.Policy = &served })

	compared, actedOn, hybridSame := 0, 0, 0
	mapDiffs := map[string]int{}
	var warnedOtherwise []string // TestEnginesWarnAlike's findings on the corpus and the goldens
	for _, w := range workloads {
		stored := map[string]*unstructured.Unstructured{}
		errs := map[string]error{}
		warned := map[string][]string{}
		for _, ns := range []string{nsEngineWebhook, nsEngineHybrid, nsEngineMAP} {
			obj := w.Obj.DeepCopy()
			obj.SetNamespace(ns)
			cl.Warnings.Take()
			errs[ns] = cl.C.Create(ctx, obj)
			warned[ns] = wincompatWarnings(cl.Warnings.Take())
			stored[ns] = obj
		}
		if errs[nsEngineWebhook] != nil {
			if errs[nsEngineHybrid] == nil {
				t.Errorf("%v: refused through the webhook (%v) but admitted through hybrid", w, errs[nsEngineWebhook])
			}
			t.Logf("%v: refused by every engine: %v", w, errs[nsEngineWebhook])
			continue
		}
		if errs[nsEngineHybrid] != nil {
			t.Errorf("%v: admitted through the webhook, refused through hybrid: %v", w, errs[nsEngineHybrid])
			continue
		}
		compared++
		if d := warningsDiffer(warned[nsEngineWebhook], warned[nsEngineHybrid]); d != "" {
			warnedOtherwise = append(warnedOtherwise, fmt.Sprintf("%v: %s", w, d))
		}
		kind := w.Obj.GetKind()
		webhookMeta, hybridMeta := templateMeta(stored[nsEngineWebhook]), templateMeta(stored[nsEngineHybrid])
		// Hybrid against the webhook alone: the record as a set, the marker set aside, then every byte.
		recordKey, mark := policy.AnnotationChanges, policy.AnnotationVersion
		if kind != "Pod" {
			recordKey, mark = policy.AnnotationTemplateChanges, policy.AnnotationTemplateChanges
		}
		// An object the webhook leaves alone (not Windows, skipped) is compared all the same.
		acted := webhookMeta["annotations"].(map[string]any)[mark] != nil
		if acted {
			actedOn++
		}
		if a, b := recordSet(t, webhookMeta, recordKey), recordSet(t, hybridMeta, recordKey); !slices.Equal(a, b) {
			t.Errorf("%v: hybrid recorded\n  %s\nthe webhook alone\n  %s", w, strings.Join(b, "\n  "), strings.Join(a, "\n  "))
		}
		hybridAnn := hybridMeta["annotations"].(map[string]any)
		why, leftToWebhook := notForAdmissionPolicy[w.File]
		if kind == "Pod" && acted && !leftToWebhook && hybridAnn[policy.AnnotationAdmissionPolicy] != "e2e" {
			t.Errorf("%v: hybrid stored no %s marker", w, policy.AnnotationAdmissionPolicy)
		}
		// Every engine labels the Windows pods it admits (the leader watches only those); the
		// comparisons below hold hybrid and the admission policies alone to the webhook's label.
		if labels, _ := webhookMeta["labels"].(map[string]any); kind == "Pod" && acted && labels[policy.LabelOS] != string(corev1.Windows) {
			t.Errorf("%v: the webhook stored no %s=windows label: %v", w, policy.LabelOS, labels)
		}
		for _, m := range []map[string]any{webhookMeta, hybridMeta} {
			ann := m["annotations"].(map[string]any)
			delete(ann, recordKey)
			delete(ann, policy.AnnotationAdmissionPolicy)
		}
		diffs := objectDiffs(comparable(stored[nsEngineWebhook]), comparable(stored[nsEngineHybrid]))
		if len(diffs) > 0 {
			t.Errorf("%v: hybrid stored another object than the webhook alone:\n  %s", w, strings.Join(diffs, "\n  "))
		} else {
			hybridSame++
		}

		// The admission policies alone.
		if leftToWebhook {
			t.Logf("%v: left to the webhook (%s); through the admission policies alone: %v", w, why, errs[nsEngineMAP])
			continue
		}
		if errs[nsEngineMAP] != nil {
			t.Errorf("%v: refused through the admission policies alone: %v", w, errs[nsEngineMAP])
			continue
		}
		for _, d := range objectDiffs(comparable(stored[nsEngineWebhook]), comparable(stored[nsEngineMAP])) {
			path, _, _ := strings.Cut(d, ": ")
			key := listedDifference(genericPath(path))
			if key == "" {
				t.Errorf("%v: the admission policies alone store another %s than the webhook, with no reason listed: %s", w, path, d)
				continue
			}
			mapDiffs[key]++
		}
	}
	keys := make([]string, 0, len(mapDiffs))
	for k := range mapDiffs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var table strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&table, "\n  %-60s %4d objects  %s", k, mapDiffs[k], mapOnlyDifferences[k])
	}
	// The narrowing rewrites, stored as the Go decision says by every engine; in a namespace enforcing
	// Pod Security restricted, after the restricted adjustments of the same patch.
	for _, p := range narrowPodsIn(restrictedLabels) {
		p.Namespace = nsEngineMAPRestricted
		if err := cl.C.Create(ctx, p); err != nil {
			t.Errorf("%s/%s: refused through the admission policies alone: %v", p.Namespace, p.Name, err)
		}
	}
	for _, ns := range []string{nsEngineWebhook, nsEngineHybrid, nsEngineMAP} {
		checkNarrowed(ctx, t, cl.C, pol, ns, map[string]string{policy.LabelEnabled: "true"})
	}
	checkNarrowed(ctx, t, cl.C, pol, nsEngineMAPRestricted, restrictedLabels)

	t.Logf("%d objects admitted by the webhook (%d of them changed by it): hybrid stored exactly what the webhook alone stores for %d (record order and the admission policy's marker aside); the admission policies alone differ from the webhook at:%s", compared, actedOn, hybridSame, table.String())
	if compared < 50 {
		t.Errorf("only %d objects compared: the corpus or the goldens did not load", compared)
	}
	t.Run("TestEnginesWarnAlike", func(t *testing.T) { testEnginesWarnAlike(t, cl, examples, compared, warnedOtherwise) })
	// Last: it restarts wincompat reading a registry.
	t.Run("TestEnginesGateAlike", func(t *testing.T) { testEnginesGateAlike(t, cl, &served) })
}

// testEnginesWarnAlike: the user gets the same admission warnings whichever engine changed the object.
// In hybrid the admission policies change it first and cannot warn, and the webhook reports what their
// record holds with what it changed itself. The corpus and the golden cases were created through the
// webhook alone and through hybrid above, with the warnings the API server returned to the client
// (kubectl prints the same) kept for each: warnedOtherwise holds those that differ. Here the README's
// examples (deploy/examples/*.yaml) are applied the same way, and their workloads then upgraded as helm
// upgrades them.
func testEnginesWarnAlike(t *testing.T, cl *e2eutil.Cluster, examples []e2eutil.Workload, compared int, warnedOtherwise []string) {
	ctx := context.Background()
	for _, d := range warnedOtherwise {
		t.Errorf("the corpus or a golden case: %s", d)
	}
	reported := 0
	for _, w := range examples {
		warned := map[string][]string{}
		stored := map[string]*unstructured.Unstructured{}
		for _, ns := range []string{nsEngineWebhook, nsEngineHybrid} {
			obj := w.Obj.DeepCopy()
			obj.SetNamespace(ns)
			cl.Warnings.Take()
			if err := cl.C.Create(ctx, obj); err != nil {
				t.Errorf("%v: refused in %s: %v", w, ns, err)
			}
			warned[ns] = wincompatWarnings(cl.Warnings.Take())
			stored[ns] = obj
		}
		if d := warningsDiffer(warned[nsEngineWebhook], warned[nsEngineHybrid]); d != "" {
			t.Errorf("%v: %s", w, d)
		}
		t.Logf("%v: %d warnings in hybrid", w, len(warned[nsEngineHybrid]))
		if w.Obj.GetKind() != "Pod" {
			// helm upgrade: its three-way merge keeps the record, which no manifest names, and sends the
			// chart's Linux-only fields again, which each engine removes again and reports again.
			upgraded := map[string][]string{}
			for _, ns := range []string{nsEngineWebhook, nsEngineHybrid} {
				obj := stored[ns]
				spec, _, _ := unstructured.NestedFieldCopy(w.Obj.Object, e2eutil.PodSpecPath(w.Obj.GetKind())...)
				if err := unstructured.SetNestedField(obj.Object, spec, e2eutil.PodSpecPath(w.Obj.GetKind())...); err != nil {
					t.Fatal(err)
				}
				cl.Warnings.Take()
				if err := cl.C.Update(ctx, obj); err != nil {
					t.Errorf("%v: upgrade refused in %s: %v", w, ns, err)
				}
				upgraded[ns] = wincompatWarnings(cl.Warnings.Take())
			}
			if d := warningsDiffer(upgraded[nsEngineWebhook], upgraded[nsEngineHybrid]); d != "" {
				t.Errorf("%v, upgraded: %s", w, d)
			}
			if !slices.ContainsFunc(upgraded[nsEngineHybrid], func(s string) bool { return strings.HasPrefix(s, "wincompat: removed ") }) && slices.ContainsFunc(warned[nsEngineHybrid], func(s string) bool { return strings.HasPrefix(s, "wincompat: removed ") }) {
				t.Errorf("%v: upgraded with its Linux-only fields again, hybrid does not say it removed them: %q", w, upgraded[nsEngineHybrid])
			}
			t.Logf("%v, upgraded: %d warnings in hybrid", w, len(upgraded[nsEngineHybrid]))
		}
		// The admission policies did change the example in hybrid, and their changes were reported:
		// the quick start's pod has its runAsUser and capabilities removed.
		if w.Obj.GetKind() == "Pod" {
			if templateMeta(stored[nsEngineHybrid])["annotations"].(map[string]any)[policy.AnnotationAdmissionPolicy] == nil {
				t.Errorf("%v: the admission policies did not act on it in hybrid", w)
			}
			for _, field := range []string{"removed spec.securityContext.runAsUser", "removed securityContext.capabilities"} {
				if !slices.ContainsFunc(warned[nsEngineHybrid], func(s string) bool { return strings.Contains(s, field) }) {
					t.Errorf("%v: hybrid does not say it %s: %q", w, field, warned[nsEngineHybrid])
				}
			}
			reported++
		}
	}
	if reported == 0 {
		t.Error("no example Pod: deploy/examples/windows-pod.yaml did not load")
	}
	t.Logf("%d objects of the corpus and goldens and %d examples: %d warned otherwise in hybrid than through the webhook alone", compared, len(examples), len(warnedOtherwise))
}

// wincompatWarnings are wincompat's warnings among those the API server returned, in the order it
// returned them: the order is part of what the user sees (what needs action first), so the engines
// must agree on it too.
func wincompatWarnings(all []string) []string {
	var out []string
	for _, w := range all {
		if strings.HasPrefix(w, "wincompat") {
			out = append(out, w)
		}
	}
	return out
}

// warningsDiffer says how hybrid's warnings differ from the webhook's alone; "" when they do not.
func warningsDiffer(webhook, hybrid []string) string {
	if slices.Equal(webhook, hybrid) {
		return ""
	}
	if slices.Equal(slices.Sorted(slices.Values(webhook)), slices.Sorted(slices.Values(hybrid))) {
		return fmt.Sprintf("hybrid warned in another order\n  %s\nthan the webhook alone\n  %s", strings.Join(hybrid, "\n  "), strings.Join(webhook, "\n  "))
	}
	var only, missing []string
	for _, w := range hybrid {
		if !slices.Contains(webhook, w) {
			only = append(only, w)
		}
	}
	for _, w := range webhook {
		if !slices.Contains(hybrid, w) {
			missing = append(missing, w)
		}
	}
	return fmt.Sprintf("hybrid warned\n  %s\nand not\n  %s", strings.Join(only, "\n  "), strings.Join(missing, "\n  "))
}

// templateMeta is the metadata of a pod, or of a workload's pod template, as a mutable map.
func templateMeta(obj *unstructured.Unstructured) map[string]any {
	path := metaPath(obj.GetKind())
	m, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
	meta, _ := m.(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		_ = unstructured.SetNestedField(obj.Object, meta, path...)
	}
	if _, ok := meta["annotations"].(map[string]any); !ok {
		meta["annotations"] = map[string]any{}
	}
	return meta
}

// recordSet is the change record as sorted keys, the old value of lists and objects as not kept (the
// admission policy cannot render them).
func recordSet(t *testing.T, meta map[string]any, key string) []string {
	t.Helper()
	raw, _ := meta["annotations"].(map[string]any)[key].(string)
	changes, err := policy.DecodeChanges(raw)
	if raw != "" && err != nil {
		t.Errorf("record %s does not parse: %v", key, err)
	}
	var out []string
	for _, ch := range changes {
		out = append(out, changeKey(asRecordedByCEL(ch)))
	}
	sort.Strings(out)
	return out
}

var (
	// The service account token volume's name ends in a random suffix.
	tokenVolume = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)
	// A Job's selector and labels carry its own UID.
	uidValue = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// comparable is the object without what differs between two creations of it: namespace, identity,
// times, managed fields, generated names.
func comparable(obj *unstructured.Unstructured) map[string]any {
	o := obj.DeepCopy()
	for _, f := range []string{"namespace", "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"} {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
	// A gated pod's PodScheduled condition carries the time it was stored.
	if conditions, ok, _ := unstructured.NestedSlice(o.Object, "status", "conditions"); ok {
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok {
				delete(m, "lastTransitionTime")
				delete(m, "lastProbeTime")
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, conditions, "status", "conditions")
	}
	js, _ := json.Marshal(o.Object)
	js = tokenVolume.ReplaceAll(js, []byte("kube-api-access-XXXXX"))
	js = uidValue.ReplaceAll(js, []byte("UID"))
	var out map[string]any
	_ = json.Unmarshal(js, &out)
	return out
}

// objectDiffs lists the paths where a and b differ, each with both values.
func objectDiffs(a, b any) []string {
	var out []string
	var walk func(path string, a, b any)
	walk = func(path string, a, b any) {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		// An absent map compares as an empty one, so that each key shows.
		if aok && b == nil {
			bm, bok = map[string]any{}, true
		}
		if bok && a == nil {
			am, aok = map[string]any{}, true
		}
		if aok && bok {
			keys := map[string]bool{}
			for k := range am {
				keys[k] = true
			}
			for k := range bm {
				keys[k] = true
			}
			for k := range keys {
				walk(strings.TrimPrefix(path+"."+k, "."), am[k], bm[k])
			}
			return
		}
		al, alok := a.([]any)
		bl, blok := b.([]any)
		if alok && blok && len(al) == len(bl) {
			for i := range al {
				walk(fmt.Sprintf("%s.%d", path, i), al[i], bl[i])
			}
			return
		}
		if ja, jb := js(a), js(b); ja != jb {
			out = append(out, fmt.Sprintf("%s: %s -> %s", path, ja, jb))
		}
	}
	walk("", a, b)
	sort.Strings(out)
	return out
}

// genericPath is a path from objectDiffs relative to the pod spec or pod template metadata, with list
// indexes as "*".
var (
	specPrefix = regexp.MustCompile(`^(spec\.(jobTemplate\.spec\.)?template\.|template\.)?(spec|metadata)\.`)
	listIndex  = regexp.MustCompile(`\.\d+(\.|$)`)
)

// listedDifference is the entry of mapOnlyDifferences that covers path (itself or a parent), or "".
func listedDifference(path string) string {
	for p := path; p != ""; {
		if _, ok := mapOnlyDifferences[p]; ok {
			return p
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ""
}

func genericPath(path string) string {
	p := specPrefix.ReplaceAllString(path, "")
	return listIndex.ReplaceAllString(p, ".*$1")
}
