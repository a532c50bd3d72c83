package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy/grantstest"
)

// fuzzKinds are the objects Decide accepts, and one it must refuse. The fuzzer picks one by index.
var fuzzKinds = []struct {
	kind      string
	newObject func() runtime.Object
}{
	{"Pod", func() runtime.Object { return &corev1.Pod{} }},
	{"Deployment", func() runtime.Object { return &appsv1.Deployment{} }},
	{"ReplicaSet", func() runtime.Object { return &appsv1.ReplicaSet{} }},
	{"StatefulSet", func() runtime.Object { return &appsv1.StatefulSet{} }},
	{"DaemonSet", func() runtime.Object { return &appsv1.DaemonSet{} }},
	{"Job", func() runtime.Object { return &batchv1.Job{} }},
	{"CronJob", func() runtime.Object { return &batchv1.CronJob{} }},
	{"ReplicationController", func() runtime.Object { return &corev1.ReplicationController{} }},
	{"PodTemplate", func() runtime.Object { return &corev1.PodTemplate{} }},
	{"Service", func() runtime.Object { return &corev1.Service{} }},
}

func fuzzKindIndex(kind string) uint8 {
	for i, k := range fuzzKinds {
		if k.kind == kind {
			return uint8(i)
		}
	}
	panic("no fuzz kind " + kind)
}

// Bits of the sides knob: the Linux side and the taints found on nodes.
const (
	sideDefaultLinux    = 1 << iota // the namespace is labelled default-os=linux
	sideLinuxEverywhere             // the policy's linuxByDefault
	sideTaints                      // ready Windows nodes carry OS taints and a team's taint
)

// teamTaint is a taint of a Windows node that says nothing of the operating system.
var teamTaint = corev1.Taint{Key: "dedicated", Value: "team-a", Effect: corev1.TaintEffectNoSchedule}

func withSides(pol *Policy, facts *Facts, sides uint8) *Policy {
	if sides&sideDefaultLinux != 0 {
		facts.Namespace.Labels[LabelDefaultOS] = "linux"
	}
	if sides&sideTaints != 0 {
		if facts.Cluster == nil {
			facts.Cluster = &Cluster{RuntimeClasses: map[string]RuntimeClass{}}
		}
		facts.Cluster.WindowsTaints = []corev1.Taint{
			{Key: "node.kubernetes.io/os", Value: "windows", Effect: corev1.TaintEffectNoExecute},
			{Key: "os", Value: "Windows", Effect: corev1.TaintEffectNoSchedule},
			teamTaint,
			{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
			{Key: "windows", Value: "true", Effect: corev1.TaintEffectNoExecute}, // names Windows, but not an OS key
		}
	}
	if sides&sideLinuxEverywhere != 0 {
		variant := *pol
		variant.LinuxByDefault = true
		return &variant
	}
	return pol
}

// checkLinuxPin: a Linux decision adds kubernetes.io/os=linux (to the nodeSelector, or to every
// required affinity term) and its record, and nothing else; the object chose no operating system
// before and has chosen Linux after; a second pass leaves it alone.
func checkLinuxPin(t *testing.T, pol *Policy, facts Facts, obj, before any, d Decision) {
	t.Helper()
	spec, inSpec := podSpecIn(t, obj), podSpecIn(t, before)
	if why := pol.OSSignal(inSpec, facts.Cluster); why != "" {
		t.Fatalf("pinned to Linux an object that chose its OS (%s)", why)
	}
	if allowedOS(spec) != (osSet{linux: true}) {
		t.Fatalf("pinned to Linux, but its node constraints allow %+v", allowedOS(spec))
	}
	if len(d.Changes) == 0 {
		t.Fatal("a Linux pin with no change recorded")
	}
	// Undo exactly the pin and the record: what is left must be the object as it came.
	undone := obj.(runtime.Object).DeepCopyObject()
	us := podSpecIn(t, undone)
	if _, had := inSpec.NodeSelector[corev1.LabelOSStable]; !had {
		delete(us.NodeSelector, corev1.LabelOSStable)
	}
	for i := range requiredTerms(us) {
		term := &us.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i]
		if n := len(term.MatchExpressions); n > 0 && term.MatchExpressions[n-1].Key == corev1.LabelOSStable {
			term.MatchExpressions = term.MatchExpressions[:n-1]
		}
	}
	meta, _ := apimeta.Accessor(undone)
	if isPod(obj) {
		delete(meta.GetAnnotations(), AnnotationChanges)
	} else if tpl, _ := PodTemplateOf(undone); tpl != nil {
		delete(tpl.Annotations, AnnotationTemplateChanges)
	}
	if got, want := normalJSON(t, undone), normalJSON(t, before); got != want {
		t.Fatalf("a Linux pin changed more than the OS pin and its record\nbefore: %s\nundone: %s", want, got)
	}
	again := obj.(runtime.Object).DeepCopyObject()
	after := mustJSON(t, obj)
	if d2, err := pol.Decide(again, facts); err != nil || d2.Linux || mustJSON(t, again) != after {
		t.Fatalf("a second pass on a pinned object: %v %+v", err, d2)
	}
}

// normalJSON is the object as JSON with empty maps, lists and objects dropped, so that a map emptied by
// an undo compares equal to one never made.
func normalJSON(t *testing.T, obj any) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(mustJSON(t, obj)), &v); err != nil {
		t.Fatal(err)
	}
	var prune func(any) any
	prune = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				if e = prune(e); e == nil {
					delete(x, k)
				} else {
					x[k] = e
				}
			}
			if len(x) == 0 {
				return nil
			}
		case []any:
			if len(x) == 0 {
				return nil
			}
			for i := range x {
				x[i] = prune(x[i])
			}
		}
		return x
	}
	return mustJSON(t, prune(v))
}

// Bits of the namespace and cluster knob.
const (
	nsEnabled = 1 << iota
	nsDefaultOS
	nsRestricted
	nsUpdate
	nsExcluded
	nsClusterOneBuild
	nsClusterTwoBuilds
	nsClusterEditedClass
)

// policyVariants are the policy's knobs turned every way the fuzzer's byte says: each bit flips one
// setting away from the default.
func policyVariants(t testing.TB) []*Policy {
	settings := []string{
		"nonRootUserName: \"\"",
		"podSecurityRestricted: false",
		"inferOSFromNodeSelector: false",
		"defaultBuild: ltsc2022",
		"arch: amd64",
		"setRuntimeClassName: false",
		"windowsNodeTaints: [{key: os, value: Windows, effect: NoSchedule}, {key: sku, value: win, effect: NoExecute}]",
	}
	variants := make([]*Policy, 1<<len(settings))
	for bits := range variants {
		doc := "apiVersion: wincompat.io/v1alpha1\nkind: Policy\n"
		for i, s := range settings {
			if bits&(1<<i) != 0 {
				doc += s + "\n"
			}
		}
		p, err := Load([]byte(doc))
		if err != nil {
			t.Fatalf("policy variant %d: %v\n%s", bits, err, doc)
		}
		variants[bits] = p
	}
	return variants
}

func fuzzFacts(knobs uint8, nsBuild string) Facts {
	f := Facts{Operation: Create, Version: "fuzz", Namespace: Namespace{Name: "demo", Labels: map[string]string{}}}
	if knobs&nsEnabled != 0 {
		f.Namespace.Labels[LabelEnabled] = "true"
	}
	if knobs&nsDefaultOS != 0 {
		f.Namespace.Labels[LabelDefaultOS] = "windows"
	}
	if knobs&nsRestricted != 0 {
		f.Namespace.Labels[labelPodSecurityEnforce] = "restricted"
	}
	if knobs&nsUpdate != 0 {
		f.Operation = Update
	}
	if knobs&nsExcluded != 0 {
		f.Namespace.Name = "kube-system"
	}
	if nsBuild != "" {
		f.Namespace.Annotations = map[string]string{AnnotationBuild: nsBuild}
	}
	if knobs&(nsClusterOneBuild|nsClusterTwoBuilds|nsClusterEditedClass) != 0 {
		f.Cluster = &Cluster{RuntimeClasses: map[string]RuntimeClass{
			"windows-2022": {NodeSelector: map[string]string{corev1.LabelOSStable: "windows", corev1.LabelWindowsBuild: "10.0.20348"}},
		}}
		if knobs&nsClusterOneBuild != 0 {
			f.Cluster.Builds = append(f.Cluster.Builds, "10.0.20348")
		}
		if knobs&nsClusterTwoBuilds != 0 {
			f.Cluster.Builds = append(f.Cluster.Builds, "10.0.17763", "10.0.26100")
		}
		if knobs&nsClusterEditedClass != 0 {
			f.Cluster.RuntimeClasses["windows-2019"] = RuntimeClass{NodeSelector: map[string]string{corev1.LabelOSStable: "linux"}}
		}
	}
	return f
}

// everyLinuxOnlyFieldPod sets every row of the strip table in every kind of container, plus the fields
// that tempt a rewrite into widening: hostProcess on one container, runAsNonRoot false, added
// capabilities.
const everyLinuxOnlyFieldPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"all","annotations":{"seccomp.security.alpha.kubernetes.io/pod":"runtime/default"}},
"spec":{"os":{"name":"windows"},"hostPID":true,"hostIPC":true,"shareProcessNamespace":false,"hostUsers":true,
"resources":{"limits":{"cpu":"1"}},
"securityContext":{"seLinuxOptions":{"level":"s0"},"seccompProfile":{"type":"RuntimeDefault"},"appArmorProfile":{"type":"RuntimeDefault"},
"fsGroup":1,"fsGroupChangePolicy":"Always","runAsUser":1000,"runAsGroup":1,"supplementalGroups":[1],"supplementalGroupsPolicy":"Merge",
"seLinuxChangePolicy":"Recursive","sysctls":[{"name":"a","value":"1"}],"runAsNonRoot":false},
"initContainers":[{"name":"i","image":"mcr.microsoft.com/windows/nanoserver:ltsc2019","securityContext":{"seLinuxOptions":{},"seccompProfile":{"type":"Unconfined"},"appArmorProfile":{"type":"Unconfined"},
"capabilities":{"add":["NET_ADMIN"],"drop":["ALL"]},"readOnlyRootFilesystem":true,"privileged":true,"allowPrivilegeEscalation":true,"procMount":"Unmasked","runAsUser":0,"runAsGroup":0}}],
"containers":[{"name":"c","image":"mcr.microsoft.com/windows/servercore:ltsc2022","resources":{"limits":{"hugepages-2Mi":"1Gi"}},
"volumeMounts":[{"name":"m","mountPath":"C:\\m","mountPropagation":"Bidirectional"}],"volumeDevices":[{"name":"d","devicePath":"/dev/x"}],
"securityContext":{"runAsUser":5,"runAsNonRoot":true,"windowsOptions":{"gmsaCredentialSpecName":"gmsa"},"privileged":false,"capabilities":{"drop":["ALL"]}}},
{"name":"h","image":"x","securityContext":{"windowsOptions":{"hostProcess":false,"runAsUserName":"ContainerAdministrator"}}}],
"ephemeralContainers":[{"name":"e","image":"x","securityContext":{"privileged":true,"runAsUser":7,"capabilities":{"add":["SYS_ADMIN"]},"runAsNonRoot":true}}],
"volumes":[{"name":"m","emptyDir":{"medium":"Memory"}}],"dnsPolicy":"ClusterFirstWithHostNet","hostNetwork":true}}`

// FuzzDecide runs the policy on objects of every kind it handles, in namespaces and clusters of every
// shape the knobs give, under every policy variant, and checks what must hold whatever the input:
// Decide never panics and refuses only kinds it does not handle; an object left alone is untouched; a
// decided one keeps no field the API server rejects on Windows, grants nothing its input did not (the
// invariant of the rewrites), records every change it made, and deciding it again changes nothing.
func FuzzDecide(f *testing.F) {
	f.Add([]byte(everyLinuxOnlyFieldPod), uint8(0), uint8(nsEnabled), "", uint8(0), uint8(0))
	f.Add([]byte(everyLinuxOnlyFieldPod), uint8(0), uint8(nsEnabled|nsRestricted|nsClusterTwoBuilds), "ltsc2019", uint8(0x7f), uint8(0))
	f.Add([]byte(everyLinuxOnlyFieldPod), uint8(0), uint8(nsEnabled|nsUpdate), "", uint8(0), uint8(0))
	// With what registries say of the images (policyBits 0x80): every answer of fuzzImages's menu.
	f.Add([]byte(`{"spec":{"os":{"name":"windows"},"containers":[{"name":"a","image":"a"},{"name":"b","image":"bb"},{"name":"c","image":"ccc"}]}}`), uint8(0), uint8(nsEnabled|nsClusterTwoBuilds), "", uint8(0x80), uint8(0))
	f.Add([]byte(`{"spec":{"os":{"name":"windows"},"initContainers":[{"name":"i","image":"iiii"}],"containers":[{"name":"a","image":"aaaaa"},{"name":"b","image":"bbbbbb"},{"name":"c","image":"ccccccc"},{"name":"d","image":"dddddddd"}]}}`), uint8(0), uint8(nsEnabled|nsClusterOneBuild), "ltsc2019", uint8(0x81), uint8(0))
	f.Add([]byte(`{"metadata":{"annotations":{"wincompat.io/build":"2019"}},"spec":{"os":{"name":"windows"},"nodeSelector":{"node.kubernetes.io/windows-build":"10.0.26100"},"containers":[{"name":"a","image":"a"}]}}`), uint8(0), uint8(nsEnabled), "", uint8(0x80), uint8(0))
	f.Add([]byte(`{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/os":"windows"},"containers":[{"name":"a","securityContext":{"runAsUser":1}}]}}}}`),
		fuzzKindIndex("Deployment"), uint8(nsEnabled), "", uint8(0), uint8(0))
	f.Add([]byte(`{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"a"}]}}}}}}`), fuzzKindIndex("CronJob"), uint8(nsEnabled|nsDefaultOS), "2022", uint8(0), uint8(0))
	f.Add([]byte(`{"spec":{}}`), fuzzKindIndex("ReplicationController"), uint8(nsEnabled|nsDefaultOS), "", uint8(0), uint8(0))
	f.Add([]byte(`{"spec":{"ports":[{"port":80}]}}`), fuzzKindIndex("Service"), uint8(nsEnabled), "", uint8(0), uint8(0))
	// The Linux side: an unpinned DaemonSet, a pod with affinity terms, a pod pinned by Exists.
	f.Add([]byte(`{"spec":{"template":{"spec":{"tolerations":[{"operator":"Exists"}],"containers":[{"name":"a"}]}}}}`), fuzzKindIndex("DaemonSet"), uint8(0), "", uint8(0), uint8(sideDefaultLinux))
	f.Add([]byte(`{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"Exists"}]},{"matchFields":[{"key":"metadata.name","operator":"In","values":["n"]}]}]}}},"containers":[{"name":"a"}]}}`), uint8(0), uint8(0), "", uint8(0), uint8(sideLinuxEverywhere))
	f.Add([]byte(`{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"Exists"}]}]}}},"containers":[{"name":"a"}]}}`), uint8(0), uint8(nsEnabled), "", uint8(0), uint8(sideDefaultLinux))
	f.Add([]byte(`{"spec":{"os":{"name":"windows"},"tolerations":[{"key":"os","operator":"Exists"}],"containers":[{"name":"a"}]}}`), uint8(0), uint8(nsEnabled|nsClusterOneBuild), "", uint8(0), uint8(sideTaints))
	// The webhook's golden inputs are the widest set of real shapes; they live with the webhook.
	goldens, _ := filepath.Glob(filepath.Join("..", "webhook", "testdata", "golden", "*.yaml"))
	for _, path := range goldens {
		if strings.HasSuffix(path, ".out.yaml") {
			continue
		}
		var c struct {
			Namespace struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"namespace"`
			Operation string          `json:"operation"`
			Object    json.RawMessage `json:"object"`
		}
		data, err := os.ReadFile(path)
		if err != nil || yaml.Unmarshal(data, &c) != nil {
			f.Fatalf("golden %s: %v", path, err)
		}
		var tm struct{ Kind string }
		_ = json.Unmarshal(c.Object, &tm)
		knobs := uint8(0)
		if c.Namespace.Labels[LabelEnabled] == "true" {
			knobs |= nsEnabled
		}
		if c.Namespace.Labels[LabelDefaultOS] == "windows" {
			knobs |= nsDefaultOS
		}
		if c.Namespace.Labels[labelPodSecurityEnforce] == "restricted" {
			knobs |= nsRestricted
		}
		if c.Operation == "UPDATE" {
			knobs |= nsUpdate
		}
		sides := uint8(0)
		if c.Namespace.Labels[LabelDefaultOS] == "linux" {
			sides |= sideDefaultLinux
		}
		f.Add([]byte(c.Object), fuzzKindIndex(tm.Kind), knobs, c.Namespace.Annotations[AnnotationBuild], uint8(0), sides)
	}

	variants := policyVariants(f)
	f.Fuzz(func(t *testing.T, raw []byte, kind, knobs uint8, nsBuild string, policyBits, sides uint8) {
		obj := fuzzKinds[int(kind)%len(fuzzKinds)].newObject()
		if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj) != nil {
			return
		}
		pol := variants[int(policyBits)%len(variants)]
		facts := fuzzFacts(knobs, nsBuild)
		pol = withSides(pol, &facts, sides)
		if policyBits&0x80 != 0 {
			facts.Images = fuzzImages(obj)
			// The image knobs, turned by the input's length (the policy byte has no bit left).
			variant := *pol
			if len(raw)%2 == 1 {
				variant.ImagesWithoutWindows = ImagesWithoutWindowsDeny
			}
			if len(raw)%4 >= 2 {
				variant.WindowsCompatibility = CompatibilityExact
			}
			pol = &variant
		}
		if len(raw)%8 >= 4 {
			// The rewrites that narrow, turned by the input's length too (rewrite_narrow_test.go).
			pol = withNarrowing(pol)
		}
		before := obj.DeepCopyObject()
		beforeJSON := mustJSON(t, before)

		var allocBefore, allocAfter goruntime.MemStats
		goruntime.ReadMemStats(&allocBefore)
		d, err := pol.Decide(obj, facts)
		goruntime.ReadMemStats(&allocAfter)
		checkRules(t, d)
		// What record_bounds_test.go measures on the worst shapes, on every input: linear in the object,
		// with room for the policy's fixed work on a small one.
		if allocated, limit := allocAfter.TotalAlloc-allocBefore.TotalAlloc, uint64(maxDecisionFactor*len(beforeJSON)+256<<10); allocated > limit {
			t.Fatalf("the decision allocated %d bytes for an object of %d, more than %d", allocated, len(beforeJSON), limit)
		}
		checkKeptBounded(t, d)
		var unsupported *UnsupportedKindError
		if _, isService := obj.(*corev1.Service); isService {
			if !errors.As(err, &unsupported) || d.Windows {
				t.Fatalf("a Service was not refused: %v %+v", err, d)
			}
			return
		}
		if err != nil {
			t.Fatalf("Decide refused a %T: %v", obj, err)
		}
		after := mustJSON(t, obj)
		if d.Denied != "" {
			if after != beforeJSON || !strings.Contains(d.Denied, "has no Windows entry") {
				t.Fatalf("a denied object was changed, or denied for another reason (%q)", d.Denied)
			}
			return
		}
		if d.Linux {
			checkLinuxPin(t, pol, facts, obj, before, d)
			return
		}
		if !d.Windows {
			if after != beforeJSON || len(d.Changes) != 0 || d.Skipped == "" {
				t.Fatalf("an object left alone (%q) was changed (%d changes)\nbefore: %s\nafter:  %s", d.Skipped, len(d.Changes), beforeJSON, after)
			}
			return
		}

		spec, inSpec := podSpecIn(t, obj), podSpecIn(t, before)
		if spec.OS == nil || spec.OS.Name != corev1.Windows {
			t.Fatalf("decided as Windows but spec.os is %+v", spec.OS)
		}
		onlyEphemeral := facts.Operation == Update && isPod(obj)
		if left := linuxOnlyLeft(spec, onlyEphemeral); len(left) > 0 {
			t.Fatalf("fields the API server rejects on Windows survived: %s", strings.Join(left, ", "))
		}
		if widened := grantstest.Widened(inSpec, spec); len(widened) > 0 {
			t.Fatalf("the decision widened privileges: %s\nbefore: %s\nafter:  %s", strings.Join(widened, "; "), beforeJSON, after)
		}
		checkRecorded(t, obj, d, onlyEphemeral)
		checkMemoryNarrowed(t, inSpec, spec)
		if facts.Cluster != nil {
			for _, taint := range facts.Cluster.WindowsTaints {
				if pol.WindowsPodsTolerate(taint) {
					continue
				}
				tolerates := func(o corev1.Toleration) bool { return o.ToleratesTaint(logr.Discard(), &taint, false) }
				if slices.ContainsFunc(spec.Tolerations, tolerates) && !slices.ContainsFunc(inSpec.Tolerations, tolerates) {
					t.Fatalf("a Windows pod was made to tolerate %s, a node taint that is not about the operating system: %+v", taint.ToString(), spec.Tolerations)
				}
			}
		}

		again := obj.DeepCopyObject()
		d2, err := pol.Decide(again, facts)
		if err != nil || !d2.Windows {
			t.Fatalf("second pass: %v %+v", err, d2)
		}
		if second := mustJSON(t, again); second != after {
			t.Fatalf("a second pass changed the object\nfirst:  %s\nsecond: %s", after, second)
		}
		for _, c := range d2.Changes {
			if c.Action != Warn {
				t.Fatalf("a second pass found a change to make: %+v", c)
			}
		}
	})
}

// checkRules fails on a change made without a rule of the rules table, or with a field its rule does
// not list (the metric's field label would say "other").
func checkRules(t *testing.T, d Decision) {
	t.Helper()
	for _, c := range d.Changes {
		r, known := rulesByCode[c.Rule]
		if !known {
			t.Fatalf("change %s %s (%s) was made with rule %q, which is not in the rules table", c.Action, c.Path, c.Reason, c.Rule)
		}
		if !slices.Contains(r.fields, c.Field()) {
			t.Fatalf("change %s %s of rule %s: field %s is not among the rule's fields %v", c.Action, c.Path, c.Rule, c.Field(), r.fields)
		}
	}
}

func mustJSON(t *testing.T, obj any) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func isPod(obj any) bool { _, ok := obj.(*corev1.Pod); return ok }

func podSpecIn(t *testing.T, obj any) *corev1.PodSpec {
	t.Helper()
	if pod, ok := obj.(*corev1.Pod); ok {
		return &pod.Spec
	}
	tpl, err := PodTemplateOf(obj)
	if err != nil || tpl == nil {
		t.Fatalf("decided as Windows without a pod template: %v", err)
	}
	return &tpl.Spec
}

// linuxOnlyLeft lists the strip-table fields still set, by trying each row's take on a copy.
func linuxOnlyLeft(spec *corev1.PodSpec, onlyEphemeral bool) []string {
	s := spec.DeepCopy()
	var left []string
	if !onlyEphemeral {
		for _, r := range podRows {
			if _, ok := r.take(s); ok {
				left = append(left, r.Path())
			}
		}
		if s.SecurityContext != nil {
			for _, r := range podSecurityContextRows {
				if _, ok := r.take(s.SecurityContext); ok {
					left = append(left, r.Path())
				}
			}
		}
	} else {
		s = &corev1.PodSpec{EphemeralContainers: s.EphemeralContainers}
	}
	forEachContainer(s, func(at containerAt, c *corev1.Container) {
		if c.SecurityContext == nil {
			return
		}
		for _, r := range containerSecurityContextRows {
			if _, ok := r.take(c.SecurityContext); ok {
				left = append(left, at.path(".securityContext."+r.Name))
			}
		}
	})
	return left
}

// checkRecorded fails unless every change of the decision is in the object's changes annotation: the
// annotation is the audit trail, and a change missing from it is a change nobody can find later.
// pods/ephemeralcontainers updates are the exception: the API server ignores annotations there.
func checkRecorded(t *testing.T, obj any, d Decision, onlyEphemeral bool) {
	t.Helper()
	if got, want := d.ChangesJSON(), EncodeChanges(d.Changes); got != want {
		t.Fatalf("ChangesJSON is not this pass's changes:\n got %s\nwant %s", got, want)
	}
	if onlyEphemeral {
		return
	}
	annotations, key := map[string]string(nil), AnnotationChanges
	if pod, ok := obj.(*corev1.Pod); ok {
		annotations = pod.Annotations
		if annotations[AnnotationVersion] != "fuzz" {
			t.Fatalf("a decided pod lacks %s: %v", AnnotationVersion, annotations)
		}
	} else {
		tpl, _ := PodTemplateOf(obj)
		annotations, key = tpl.Annotations, AnnotationTemplateChanges
	}
	if len(d.Changes) == 0 {
		return
	}
	recorded, err := DecodeChanges(annotations[key])
	if err != nil {
		t.Fatalf("%s does not decode: %v", key, err)
	}
next:
	for _, c := range d.Changes {
		for _, r := range recorded {
			if r.equal(c) {
				continue next
			}
		}
		t.Fatalf("change %+v is not recorded in %s", c, key)
	}
}

// fuzzImages answers for every container image of obj what a registry might: one entry of a fixed menu
// chosen by the reference, so the same image always gets the same answer (as a cache would give).
func fuzzImages(obj any) map[string]Image {
	win := func(v string) Platform { return Platform{OS: "windows", Architecture: "amd64", OSVersion: v} }
	menu := []Image{
		{Platforms: []Platform{win("10.0.17763.5830")}},
		{Platforms: []Platform{win("10.0.20348.2227"), {OS: "linux", Architecture: "amd64"}}},
		{Platforms: []Platform{win("10.0.26100.1742")}},
		{Platforms: []Platform{win("10.0.17763.1"), win("10.0.20348.1")}},
		{Platforms: []Platform{{OS: "linux", Architecture: "arm64"}}},
		{Platforms: []Platform{win("")}},
		{Err: "registry lookup timed out after 1s"},
		{Platforms: []Platform{win("garbage")}},
	}
	var spec *corev1.PodSpec
	if pod, ok := obj.(*corev1.Pod); ok {
		spec = &pod.Spec
	} else if tpl, err := PodTemplateOf(obj); err == nil && tpl != nil {
		spec = &tpl.Spec
	} else {
		return nil
	}
	out := map[string]Image{}
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			out[c.Image] = menu[len(c.Image)%len(menu)]
		}
	}
	return out
}

// FuzzLoad reads policy files of any shape: Load never panics, a refusal stays short whatever the file
// holds, and a policy it accepts is valid and prints as a file that reads back as the same policy.
func FuzzLoad(f *testing.F) {
	f.Add(DefaultPolicyYAML)
	f.Add([]byte(header + "arch: arm64\ndefaultBuild: 2022\nwindowsNodeTaints: [{key: os, value: yes, effect: NoSchedule}]\n"))
	f.Add([]byte(header + "builds:\n- &b {build: 10.0.20348, names: [ltsc2022]}\n- {<<: *b, build: 10.0.26100, names: [x]}\ninjectorOptOuts: []\n"))
	f.Add([]byte(header + "arch: a\narch: b\nBuilds: ~\nbuilds: [x, {names: {a: b}}]\n"))
	f.Add([]byte(header + "---\nkind: Policy\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(data)
		if err != nil {
			if len(err.Error()) > 16<<10 {
				t.Fatalf("a refusal of %d bytes", len(err.Error()))
			}
			return
		}
		if errs := p.Validate(); len(errs) > 0 {
			t.Fatalf("Load accepted a policy Validate refuses: %v", errs)
		}
		again, err := Load(p.YAML())
		if err != nil {
			t.Fatalf("the printed policy does not load: %v\n%s", err, p.YAML())
		}
		if !equality.Semantic.DeepEqual(p, again) {
			t.Fatalf("the printed policy reads back as another:\n%+v\n%+v", p, again)
		}
	})
}
