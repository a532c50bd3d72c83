package policy

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recordCases are changes of every shape the record writes differently, with the entry each gets: the
// format policy/README.md documents.
var recordCases = []struct {
	change Change
	entry  string
}{
	{Change{Action: Strip, Path: "spec.containers[app].securityContext.runAsUser", From: jsonValue(int64(1001)), Reason: ReasonLinuxOnly, Rule: "strip:containers[*].securityContext.runAsUser"},
		`["s","spec.containers[app]",{"runAsUser":1001}]`},
	// A container name, unvalidated at admission, that holds brackets and another row's field: the row
	// is the path's end, as the admission policies leave the code out for every strip too.
	{Change{Action: Strip, Path: `spec.initContainers[a].securityContext.privileged]"[].securityContext.runAsUser`, From: jsonValue(int64(7)), Reason: ReasonLinuxOnly, Rule: "strip:containers[*].securityContext.runAsUser"},
		`["s","spec.initContainers[a].securityContext.privileged]\"[]",{"runAsUser":7}]`},
	{Change{Action: Strip, Path: "spec.securityContext.seccompProfile", Reason: ReasonLinuxOnly, Rule: "strip:spec.securityContext.seccompProfile"},
		`["s","spec.securityContext",{"seccompProfile":null}]`},
	{Change{Action: Rewrite, Path: "spec.dnsPolicy", From: jsonValue("ClusterFirstWithHostNet"), To: jsonValue("ClusterFirst"), Reason: ReasonDNSPolicy, Rule: RuleDNSPolicy},
		`["r",null,"ClusterFirstWithHostNet","ClusterFirst","dns-policy"]`},
	{Change{Action: Inject, Path: "spec.os.name", To: jsonValue("windows"), Reason: ReasonDefaultOSWindows, Rule: RuleWindowsOS},
		`["i",null,null,"windows","windows-os","namespace is labelled wincompat.io/default-os=windows"]`},
	{Change{Action: Inject, Path: "metadata.labels", To: jsonValue(map[string]string{"sidecar.istio.io/inject": "false", "instana-autotrace": "false"}), Reason: InjectorOptOutReason([]string{"istio", "instana"}), Rule: RuleInjectorOptOuts},
		`["i",null,null,["istio","instana"],"injector-opt-outs"]`},
	// Named in another order than the table's: the reason is written, the keys derived.
	{Change{Action: Inject, Path: "metadata.labels", To: jsonValue(map[string]string{"sidecar.istio.io/inject": "false", "instana-autotrace": "false"}), Reason: InjectorOptOutReason([]string{"instana", "istio"}), Rule: RuleInjectorOptOuts},
		`["i",null,null,["istio","instana"],"injector-opt-outs","opts out of Linux-only sidecar injectors (instana, istio)"]`},
	// A key no injector of the table sets: the map as it is.
	{Change{Action: Inject, Path: "metadata.annotations", To: jsonValue(map[string]string{"example.com/inject": "false"}), Reason: "opts out", Rule: RuleInjectorOptOuts},
		`["i","metadata.annotations",null,{"example.com/inject":"false"},"injector-opt-outs","opts out"]`},
	{Change{Action: Inject, Path: "spec.tolerations", To: jsonValue(corev1.Toleration{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}),
		Reason: windowsTaintReason(corev1.Taint{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}), Rule: RuleWindowsTolerations},
		`["i",null,null,"os=windows:NoSchedule","windows-tolerations"]`},
	{Change{Action: Warn, Path: "spec.containers[x].image", Reason: "example.com/x:1 (linux/amd64) has no Windows entry: it cannot run on a Windows node", Rule: RuleLinuxOnlyImage},
		`["w","spec.containers[x].image",null,null,"linux-only-image","example.com/x:1 (linux/amd64) has no Windows entry: it cannot run on a Windows node"]`},
	// A change of no rule the tables have (read back from a record its author wrote): "" as its rule, the
	// reason kept.
	{Change{Action: Rewrite, Path: `spec.volumes[a"b\c].emptyDir.medium`, From: jsonValue("Memory"), To: jsonValue(""), Reason: "<disk> & more\n"},
		`["r","spec.volumes[a\"b\\c].emptyDir.medium","Memory","","","\u003cdisk\u003e \u0026 more\n"]`},
	// A strip-table row's field with another reason (an earlier wording): the row's code, the reason.
	{Change{Action: Strip, Path: "spec.hostPID", From: jsonValue(true), Reason: "ünïcode \u2028 \x01", Rule: "strip:spec.hostPID"},
		`["s","spec.hostPID",true,null,null,"ünïcode \u2028 \u0001"]`},
	// A rule code read back from a record its author wrote is escaped like any string.
	{Change{Action: Warn, Path: "spec.x", Reason: "r", Rule: `x"<y>`},
		`["w","spec.x",null,null,"x\"\u003cy\u003e","r"]`},
}

func TestRecordEntries(t *testing.T) {
	for _, tc := range recordCases {
		record := EncodeChanges([]Change{tc.change})
		if want := RecordPrefix + `"c":[` + tc.entry + "]}"; record != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.change.Path, record, want)
		}
		if !json.Valid([]byte(record)) {
			t.Errorf("%s: not JSON: %s", tc.change.Path, record)
		}
		want := tc.change
		want.Rule = RuleOf(tc.change)
		got, err := DecodeChanges(record)
		if err != nil {
			t.Fatalf("%s: %v", record, err)
		}
		if len(got) != 1 || !reflect.DeepEqual(normalized(got[0]), normalized(want)) {
			t.Errorf("%s reads back as\n %+v\nwant\n %+v", record, got, want)
		}
	}
}

// normalized compares JSON values by their text.
func normalized(c Change) Change {
	if len(c.From) == 0 {
		c.From = nil
	}
	if len(c.To) == 0 {
		c.To = nil
	}
	return c
}

// Every change a decision makes reads back from its record as it was made, rule and reason included:
// the audit and `wincompat mutate --explain` lose nothing to the shorter record.
func TestRecordRoundTripsDecisions(t *testing.T) {
	for _, pod := range []string{
		`{"metadata":{"annotations":{"seccomp.security.alpha.kubernetes.io/pod":"runtime/default"}},"spec":{"os":{"name":"windows"},"hostPID":true,"dnsPolicy":"ClusterFirstWithHostNet",
		  "securityContext":{"runAsUser":1000,"fsGroup":2,"seccompProfile":{"type":"RuntimeDefault"}},
		  "volumes":[{"name":"m","emptyDir":{"medium":"Memory"}}],
		  "containers":[{"name":"app","image":"r.example/app:1","securityContext":{"privileged":true,"capabilities":{"add":["NET_ADMIN"]}},
		    "resources":{"requests":{"memory":"1Gi","hugepages-2Mi":"2Mi"},"limits":{"hugepages-2Mi":"2Mi"}},
		    "volumeMounts":[{"name":"m","mountPath":"C:\\m","mountPropagation":"HostToContainer","subPath":"x"}]}]}}`,
		`{"spec":{"nodeSelector":{"kubernetes.io/os":"windows"},"containers":[{"name":"a","securityContext":{"runAsNonRoot":true}}]}}`,
	} {
		d := decideJSON(t, Default(), pod, nil, nil)
		if len(d.Changes) < 3 {
			t.Fatalf("only %d changes", len(d.Changes))
		}
		got, err := DecodeChanges(d.ChangesJSON())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(d.Changes) {
			t.Fatalf("%d changes read back, %d made", len(got), len(d.Changes))
		}
		for i, c := range d.Changes {
			if !reflect.DeepEqual(normalized(got[i]), normalized(c)) {
				t.Errorf("change %d reads back as\n %+v\nwas\n %+v", i, got[i], c)
			}
		}
	}
}

// A record already on the object is appended to: the new changes after its entries, as the admission
// policies append them, and nothing it holds repeated.
func TestRecordAppends(t *testing.T) {
	const prior = RecordPrefix + `"c":[["i",null,null,"windows","windows-node-selector"],["s","spec.containers[app]",{"runAsUser":1000}]]}`
	meta := metav1.ObjectMeta{Annotations: map[string]string{AnnotationChanges: prior}}
	found := []Change{
		{Action: Inject, Path: "spec.nodeSelector[kubernetes.io/os]", To: jsonValue("windows"), Reason: ReasonPinned, Rule: RuleWindowsNodeSelector}, // recorded already
		{Action: Strip, Path: "spec.hostPID", From: jsonValue(true), Reason: ReasonLinuxOnly, Rule: "strip:spec.hostPID"},
	}
	if written := recordChanges(&meta, AnnotationChanges, found); written != "" {
		t.Errorf("a merged record is returned as this pass's alone: %s", written)
	}
	if got, want := meta.Annotations[AnnotationChanges], prior[:len(prior)-2]+`,["s","spec",{"hostPID":true}]]}`; got != want {
		t.Errorf("appended:\n got %s\nwant %s", got, want)
	}
	merged, err := DecodeChanges(meta.Annotations[AnnotationChanges])
	if err != nil || len(merged) != 3 || merged[2].Path != "spec.hostPID" {
		t.Fatalf("the appended record reads as %+v, %v", merged, err)
	}
	// Again, with one more change: the entries grow, the new one last.
	more := []Change{{Action: Strip, Path: "spec.hostIPC", From: jsonValue(true), Reason: ReasonLinuxOnly, Rule: "strip:spec.hostIPC"}}
	recordChanges(&meta, AnnotationChanges, append(found, more...))
	if got, want := meta.Annotations[AnnotationChanges], prior[:len(prior)-2]+`,["s","spec",{"hostPID":true}],["s","spec",{"hostIPC":true}]]}`; got != want {
		t.Errorf("appended again:\n got %s\nwant %s", got, want)
	}
}

// A record this wincompat cannot read, of another version (the unreleased versions 1 and 2, or one
// nesting them) or edited by hand, says so when read (the audit reports it), and admission replaces it
// with a record of this pass's changes alone, as the admission policies replace it: nothing of it is
// trusted, or kept.
func TestRecordOfAnotherVersionIsReplaced(t *testing.T) {
	found := []Change{{Action: Strip, Path: "spec.hostPID", From: jsonValue(true), Reason: ReasonLinuxOnly, Rule: "strip:spec.hostPID"}}
	fresh := EncodeChanges(found)
	for _, s := range []string{
		`[{"action":"inject","path":"spec.nodeSelector[kubernetes.io/os]","to":"windows","reason":"schedules onto Windows nodes"}]`,
		`{"v":2,"c":[["strip","spec.hostPID",true],["inject","spec.nodeSelector[kubernetes.io/os]",null,"windows","windows-node-selector"]]}`,
		RecordPrefix + `"v1":[{"action":"warn","path":"spec.x","reason":"r"}],"c":[]}`,
		RecordPrefix + `"v2":{"v":2,"c":[]},"c":[["s","spec",{"hostIPC":true}]]}`,
		RecordPrefix + `"c":[["s","spec",-1]]}`,
	} {
		if got, err := DecodeChanges(s); err == nil {
			t.Errorf("%s reads as %+v", s, got)
		} else if !strings.Contains(err.Error(), "change record") {
			t.Errorf("%s: the error does not say what is wrong: %v", s, err)
		}
		meta := metav1.ObjectMeta{Annotations: map[string]string{AnnotationChanges: s}}
		if written := recordChanges(&meta, AnnotationChanges, found); written != fresh {
			t.Errorf("%s: the pass returns %q, want its own record %s", s, written, fresh)
		}
		if got := meta.Annotations[AnnotationChanges]; got != fresh {
			t.Errorf("%s is not replaced:\n got %s\nwant %s", s, got, fresh)
		}
	}
}

// What is not a record of this version is an error (the audit reports it), never a panic or a guess.
func TestRecordRefusesWhatItCannotRead(t *testing.T) {
	for _, s := range []string{
		`{"v":4,"c":[]}`,
		`{"c":[]}`,
		`{"v":"3","c":[]}`,
		`[{"action":"strip","path":"spec.hostPID","from":true,"reason":"not supported on Windows"}]`,
		`{"v":2,"c":[["strip","spec.hostPID",true]]}`,
		`{"v":3,"c":[["s"]]}`,
		`{"v":3,"c":[[1,"spec.x"]]}`,
		`{"v":3,"c":[["s","spec.x",1,2,3]]}`,
		`{"v":3,"c":[["s","spec.x",1,2,"r","why","more"]]}`,
		`{"v":3,"c":[{"action":"s"}]}`,
		`{"v":3,"c":{}}`,
		`{"v":3,"v1":[],"c":[]}`,
		`{"v":3,"v2":{"v":2,"c":[]},"c":[]}`,
		`{"v":3,"x":1,"c":[]}`,
		`{"v":3,"c":[["i","metadata.labels",null,[1],"injector-opt-outs"]]}`[:40],
		`{"v":3,"c":[["s","spec",-1]]}`,
		`{"v":3,"c":[["s","spec.x",{"a":1}]]}`,
		`{"v":3,"c":[["s","spec",{}]]}`,
		`{"v":3,"c":[["s","spec",{"hostPID":true}],["s","spec.containers",-1]]}`,
		`{"v":3,"c":[["i",null,null,"windows"]]}`,
		`{"v":3,"c":[["i",null,null,"windows","memory-emptydir"]]}`,
		`{"v":3,"c":[["i",null,null,["gone"],"injector-opt-outs"]]}`,
		`{"v":3,"c":[["i",null,null,"os","windows-tolerations"]]}`,
		`{"v":3,"c":[["i","spec.x",null,["1"],"build"]]}`,
		`{"v":3,"c":[["w",null,null,null,"build",[]]]}`,
		`{"v":3,"c":[["w",null,null,null,"dns-policy",["x"]]]}`,
		`not json`,
	} {
		if got, err := DecodeChanges(s); err == nil {
			t.Errorf("%s reads as %+v", s, got)
		}
	}
	// Names no injector of this version has stay as they were written.
	got, err := DecodeChanges(`{"v":3,"c":[["i","metadata.labels",null,["gone"],"injector-opt-outs","opts out of gone"]]}`)
	if err != nil || len(got) != 1 || string(got[0].To) != `["gone"]` || got[0].Reason != "opts out of gone" {
		t.Errorf("unknown injector: %+v, %v", got, err)
	}
}

// A reason is left out only when the table gives it back: every reason of every rule, reworded, is
// written.
func TestRecordKeepsEveryReworded(t *testing.T) {
	for _, row := range rulesTable {
		for _, why := range append([]string{"reworded"}, row.reasons...) {
			c := Change{Action: Warn, Path: "spec.x", Reason: why, Rule: row.rule}
			got, err := DecodeChanges(EncodeChanges([]Change{c}))
			if err != nil || len(got) != 1 || got[0].Reason != why || got[0].Rule != row.rule {
				t.Errorf("%s %q reads back as %+v, %v", row.rule, why, got, err)
			}
		}
	}
	if !strings.HasPrefix(EncodeChanges(nil), RecordPrefix) {
		t.Error("an empty record has no version")
	}
}

// Any annotation value reads without a panic, and what reads re-encodes to a record that reads back as
// the same changes, whether written afresh or after it: a merge never alters what an earlier pass, or a
// pod's author, recorded.
func FuzzRecord(f *testing.F) {
	for _, tc := range recordCases {
		f.Add(EncodeChanges([]Change{tc.change}))
	}
	f.Add(`{"v":3,"c":[["s","spec.containers[a]",{"runAsUser":1,"x":null}],["s","spec.containers[a]",-1],["s","spec",{"hostPID":true}]]}`)
	extra := Change{Action: Strip, Path: "spec.containers[a].securityContext.runAsUser", From: jsonValue(int64(1)), Reason: ReasonLinuxOnly, Rule: "strip:containers[*].securityContext.runAsUser"}
	f.Fuzz(func(t *testing.T, s string) {
		kind, held, err := decodeRecord(s)
		if err != nil {
			return
		}
		after := []Change{extra} // what a record written after s holds
		if kind != noRecord {
			after = append(slices.Clone(held), extra)
		}
		for record, want := range map[string][]Change{EncodeChanges(held): held, appendRecord(s, kind, []Change{extra}): after} {
			again, err := DecodeChanges(record)
			if err != nil {
				t.Fatalf("%s re-encodes to %s, which does not read: %v", s, record, err)
			}
			if len(again) != len(want) {
				t.Fatalf("%s as %s: %d changes, %d read back", s, record, len(want), len(again))
			}
			for i := range want {
				w, g := comparable(want[i]), comparable(again[i])
				if !reflect.DeepEqual(w, g) {
					t.Fatalf("change %d of %s as %s:\n was %+v\nreads %+v", i, s, record, w, g)
				}
			}
		}
	})
}

// comparable is a change as the record keeps it: its rule as RuleOf finds it, a null value as none.
func comparable(c Change) Change {
	c.Rule = RuleOf(c)
	c.split = false // where a group starts: not what the change is
	for _, v := range []*json.RawMessage{&c.From, &c.To} {
		if len(*v) == 0 || string(*v) == "null" {
			*v = nil
		}
	}
	return c
}

// An injectorSet has a bit for each row of the injector table.
func TestInjectorSetHoldsTheTable(t *testing.T) {
	if len(linuxOnlyInjectors) > 64 {
		t.Fatalf("%d injectors: injectorSet holds 64", len(linuxOnlyInjectors))
	}
	all := injectorSet(1<<len(linuxOnlyInjectors) - 1)
	want := map[string]string{}
	for _, in := range linuxOnlyInjectors {
		want[in.Key] = in.Value
	}
	if got, w := string(appendOptOuts(nil, all)), string(jsonValue(want)); got != w {
		t.Errorf("appendOptOuts writes %s, jsonValue %s", got, w)
	}
	if set, ok := optOutsSet(jsonValue(want)); !ok || set != all {
		t.Errorf("optOutsSet of every opt-out: %b, %v", set, ok)
	}
	if !optOutReasonIs(InjectorOptOutReason(all.names()), all) || optOutReasonIs(InjectorOptOutReason(all.names()[1:]), all) {
		t.Error("optOutReasonIs disagrees with InjectorOptOutReason")
	}
}

// tolerationReasonIs agrees with derivedReason on every shape of taint, and the odd ones.
func TestTolerationReasonIs(t *testing.T) {
	for _, taint := range []corev1.Taint{
		{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule},
		{Key: "os", Effect: corev1.TaintEffectNoExecute},
		{Key: "os", Value: "windows"},
		{Key: "node.kubernetes.io/os"},
		{Key: "a", Value: "b=c", Effect: "x:y"},
		{Key: "a<b", Value: "w", Effect: corev1.TaintEffectNoSchedule},
		{Value: "w", Effect: corev1.TaintEffectNoSchedule},
	} {
		to := jsonValue(corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect})
		c := Change{To: to, Reason: windowsTaintReason(taint), Rule: RuleWindowsTolerations}
		derived := derivedReason(c, RuleWindowsTolerations) == c.Reason
		if got := tolerationReasonIs(c.Reason, to); got && !derived {
			t.Errorf("%+v: recognised, but the record would read back %q", taint, derivedReason(c, RuleWindowsTolerations))
		}
		if plainJSON(taint.Key+taint.Value+string(taint.Effect)) && taint.Key != "" && !strings.Contains(taint.Value, ":") && !tolerationReasonIs(c.Reason, to) {
			t.Errorf("%+v: not recognised (%s, %q)", taint, to, c.Reason)
		}
		if tolerationReasonIs(c.Reason+"x", to) || tolerationReasonIs("tolerates the taint os=windows:NoSchedule found on Windows nodes", to) {
			t.Errorf("%+v: another reason recognised", taint)
		}
	}
}

// The entries of several changes each: the strips of one object as one group, a group with the fields
// and values of the one before as -1, and the values the tables give back written by what they are made
// from, or as they are when the tables would not give them back exactly.
func TestRecordGroups(t *testing.T) {
	strip := func(path string, from any) Change {
		rule := stripRuleOf(path)
		if rule == "" {
			t.Fatalf("%s: no strip-table row", path)
		}
		return Change{Action: Strip, Path: path, From: jsonValue(from), Reason: ReasonLinuxOnly, Rule: rule}
	}
	term := func(builds ...string) json.RawMessage {
		return jsonValue(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: builds}}})
	}
	for _, tc := range []struct {
		name    string
		changes []Change
		entries string
	}{
		{"two containers alike", []Change{
			strip("spec.hostPID", true), strip("spec.securityContext.fsGroup", int64(1)), strip("spec.securityContext.runAsUser", int64(2)),
			strip("spec.containers[a].securityContext.runAsUser", int64(2)), strip("spec.containers[a].securityContext.privileged", false),
			strip("spec.containers[b].securityContext.runAsUser", int64(2)), strip("spec.containers[b].securityContext.privileged", false),
			strip("spec.initContainers[b].securityContext.runAsUser", int64(3))},
			`["s","spec",{"hostPID":true}],["s","spec.securityContext",{"fsGroup":1,"runAsUser":2}],` +
				`["s","spec.containers[a]",{"runAsUser":2,"privileged":false}],["s","spec.containers[b]",-1],["s","spec.initContainers[b]",{"runAsUser":3}]`},
		// Another change between two alike groups: the second is written whole.
		{"apart", []Change{
			strip("spec.containers[a].securityContext.runAsUser", int64(2)),
			{Action: Warn, Path: "spec.x", Reason: "r", Rule: RuleVolumeDevices},
			strip("spec.containers[b].securityContext.runAsUser", int64(2))},
			`["s","spec.containers[a]",{"runAsUser":2}],["w","spec.x",null,null,"volume-devices","r"],["s","spec.containers[b]",{"runAsUser":2}]`},
		// A strip with another reason, or a value the group would read back as none, is an entry of its own.
		{"not in a group", []Change{
			strip("spec.hostPID", true),
			{Action: Strip, Path: "spec.hostIPC", From: jsonValue(true), Reason: "other", Rule: "strip:spec.hostIPC"},
			{Action: Strip, Path: "spec.securityContext.fsGroup", From: json.RawMessage("null"), Reason: ReasonLinuxOnly, Rule: "strip:spec.securityContext.fsGroup"}},
			`["s","spec",{"hostPID":true}],["s","spec.hostIPC",true,null,null,"other"],["s","spec.securityContext.fsGroup",null]`},
		{"build pins", []Change{
			{Action: Inject, Path: affinityTermsPath, To: term("10.0.20348", "10.0.26100"), Reason: buildsReason([]string{"10.0.20348", "10.0.26100"}), Rule: RuleBuild},
			{Action: Inject, Path: affinityTermsPath + "[1].matchExpressions", To: jsonValue(corev1.NodeSelectorRequirement{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{"10.0.17763"}}),
				Reason: buildsReason([]string{"10.0.17763"}), Rule: RuleBuild},
			{Action: Inject, Path: buildPinPath, To: jsonValue("10.0.20348"), Reason: ReasonPinned, Rule: RuleBuild},
			{Action: Warn, Path: buildPinPath, Reason: noBuildNodeReason([]string{"10.0.20348", "10.0.26100"}), Rule: RuleBuild},
			// Another key, or a reason that is not the builds': written as they are.
			{Action: Inject, Path: affinityTermsPath, To: jsonValue(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"v"}}}}), Reason: "r", Rule: RuleBuild},
			{Action: Inject, Path: affinityTermsPath, To: term("1"), Reason: "r", Rule: RuleBuild}},
			`["i",null,null,["10.0.20348","10.0.26100"],"build"],["i","` + affinityTermsPath + `[1].matchExpressions",null,["10.0.17763"],"build"],` +
				`["i",null,null,"10.0.20348","build"],["w",null,null,null,"build",["10.0.20348","10.0.26100"]],` +
				`["i","` + affinityTermsPath + `",null,{"matchExpressions":[{"key":"k","operator":"In","values":["v"]}]},"build","r"],["i",null,null,["1"],"build","r"]`},
		{"tolerations", []Change{
			{Action: Inject, Path: "spec.tolerations", To: jsonValue(corev1.Toleration{Key: "os", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoExecute}),
				Reason: windowsTaintReason(corev1.Taint{Key: "os", Effect: corev1.TaintEffectNoExecute}), Rule: RuleWindowsTolerations},
			// Not of the form a taint makes: as it is.
			{Action: Inject, Path: "spec.tolerations", To: jsonValue(corev1.Toleration{Key: "os", Operator: corev1.TolerationOpExists}), Reason: "r", Rule: RuleWindowsTolerations},
			{Action: Inject, Path: "spec.tolerations", To: jsonValue(corev1.Toleration{Key: "a", Operator: corev1.TolerationOpEqual, Value: "b:c"}), Reason: "r", Rule: RuleWindowsTolerations}},
			`["i",null,null,"os=:NoExecute","windows-tolerations"],["i",null,null,{"key":"os","operator":"Exists"},"windows-tolerations","r"],` +
				`["i",null,null,{"key":"a","operator":"Equal","value":"b:c"},"windows-tolerations","r"]`},
	} {
		record := EncodeChanges(tc.changes)
		if want := RecordPrefix + `"c":[` + tc.entries + "]}"; record != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, record, want)
		}
		got, err := DecodeChanges(record)
		if err != nil || len(got) != len(tc.changes) {
			t.Fatalf("%s: %s reads back as %d changes, %v", tc.name, record, len(got), err)
		}
		for i, c := range tc.changes {
			if !reflect.DeepEqual(comparable(got[i]), comparable(c)) {
				t.Errorf("%s: change %d reads back as\n %+v\nwant\n %+v", tc.name, i, got[i], c)
			}
		}
	}
}

// Two containers of one name (the API server refuses the pod, after the admission policies wrote its
// record): their strips are two groups, as the admission policies write one per container, and read
// back so.
func TestRecordSplitsContainersOfOneName(t *testing.T) {
	d := decideJSON(t, Default(), `{"spec":{"os":{"name":"windows"},"containers":[
		{"name":"a","securityContext":{"runAsUser":0}},{"name":"a","securityContext":{"privileged":true}}]}}`, nil, nil)
	record := d.ChangesJSON()
	if !strings.Contains(record, `["s","spec.containers[a]",{"runAsUser":0}],["s","spec.containers[a]",{"privileged":true}]`) {
		t.Fatalf("two containers of one name in one group: %s", record)
	}
	got, err := DecodeChanges(record)
	if err != nil {
		t.Fatal(err)
	}
	if again := EncodeChanges(got); again != record {
		t.Errorf("read back and written again:\n got %s\nwant %s", again, record)
	}
}

// A toleration written as its taint reads back as encoding/json writes the toleration, whether read
// without it (a code that needs no escaping) or with it: the key before the first "=", the effect after
// the last ":".
func TestTolerationOfCode(t *testing.T) {
	for _, code := range []string{"os=windows:NoSchedule", "os=:NoExecute", "os=w:", "os=:", "=w:e", "a=b=c:d:x", "a<b=é:\u2028", "k=v", "k:e"} {
		got, ok := tolerationOfCode(jsonValue(code))
		kv, effect, colon := cutLast(code, ":")
		key, value, equals := strings.Cut(kv, "=")
		if !colon || !equals {
			if ok {
				t.Errorf("%q reads back as %s", code, got)
			}
			continue
		}
		want := jsonValue(corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: corev1.TaintEffect(effect)})
		if !ok || string(got) != string(want) {
			t.Errorf("%q reads back as %s (%v), want %s", code, got, ok, want)
		}
	}
}
