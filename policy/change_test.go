package policy

import (
	"encoding/json"
	"testing"
)

func TestChangeField(t *testing.T) {
	for path, want := range map[string]string{
		"spec.containers[app].securityContext.runAsUser":             "spec.containers[*].securityContext.runAsUser",
		"spec.containers[a[b]].volumeMounts[C:\\x].mountPropagation": "spec.containers[*].volumeMounts[*].mountPropagation",
		"spec.nodeSelector[node.kubernetes.io/windows-build]":        "spec.nodeSelector[node.kubernetes.io/windows-build]",
		"metadata.annotations[container.apparmor.security.beta/app]": "metadata.annotations[*]",
		"spec.hostPID": "spec.hostPID",
	} {
		if got := (Change{Path: path}).Field(); got != want {
			t.Errorf("Field(%q) = %q, want %q", path, got, want)
		}
	}
}

// EncodeChanges writes the JSON itself; it must be byte for byte what encoding/json writes, escapes
// included, or annotations written by earlier versions would stop comparing equal.
func TestEncodeChangesMatchesEncodingJSON(t *testing.T) {
	changes := []Change{
		{Action: Strip, Path: "spec.containers[app].securityContext.runAsUser", From: jsonValue(int64(1001)), Reason: "not supported on Windows", Rule: RuleNonRootIntent},
		{Action: Rewrite, Path: `spec.volumes[a"b\c].emptyDir.medium`, From: jsonValue("Memory"), To: jsonValue(""), Reason: "<disk> & more\n"},
		{Action: Inject, Path: "spec.tolerations", To: jsonValue(map[string]any{"key": "os", "n": 1}), Reason: "ünïcode \u2028 \x01"},
		{Action: Warn, Path: "spec.containers[x].volumeDevices", Reason: ""},
	}
	for _, tc := range [][]Change{nil, {}, changes} {
		want, err := json.Marshal(tc)
		if err != nil {
			t.Fatal(err)
		}
		if tc == nil {
			want = []byte("[]") // an empty annotation is a list, never null
		}
		if got := EncodeChanges(tc); got != string(want) {
			t.Errorf("EncodeChanges:\n got %s\nwant %s", got, want)
		}
	}
}

// jsonValue writes some values itself; they must read as encoding/json writes them.
func TestJSONValueMatchesEncodingJSON(t *testing.T) {
	n, yes := int64(-9007199254740993), true
	for _, v := range []any{&n, n, &yes, false, (*int64)(nil), (*bool)(nil), "a\"<b>", map[string]string{"k": "v"}, []int{1}} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonValue(v); string(got) != string(want) {
			t.Errorf("jsonValue(%#v) = %s, want %s", v, got, want)
		}
	}
}

// The rule a change is made with stays out of the record, and a change found again merges with its
// record, which has no rule.
func TestRuleIsNotRecorded(t *testing.T) {
	fresh := []Change{{Action: Rewrite, Path: "spec.dnsPolicy", From: jsonValue("ClusterFirstWithHostNet"), To: jsonValue("ClusterFirst"), Reason: ReasonDNSPolicy, Rule: RuleDNSPolicy}}
	record := EncodeChanges(fresh)
	if want := `[{"action":"rewrite","path":"spec.dnsPolicy","from":"ClusterFirstWithHostNet","to":"ClusterFirst","reason":"` + ReasonDNSPolicy + `"}]`; record != want {
		t.Errorf("record %s, want %s", record, want)
	}
	recorded, err := DecodeChanges(record)
	if err != nil {
		t.Fatal(err)
	}
	if _, added := mergeChanges(recorded, fresh); added {
		t.Error("a change found again was added beside its record")
	}
	many := make([]Change, manyChanges+1) // the map's path
	for i := range many {
		many[i] = Change{Action: Warn, Path: "spec.containers[c" + string(rune('a'+i)) + "].volumeDevices", Reason: reasonVolumeDevices, Rule: RuleVolumeDevices}
	}
	recorded, _ = DecodeChanges(EncodeChanges(many))
	if _, added := mergeChanges(recorded, many); added {
		t.Error("changes found again were added beside their record")
	}
}
