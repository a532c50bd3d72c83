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

// jsonValue writes some values itself; they must read as encoding/json writes them.
func TestJSONValueMatchesEncodingJSON(t *testing.T) {
	n, yes := int64(-9007199254740993), true
	for _, v := range []any{&n, n, &yes, false, (*int64)(nil), (*bool)(nil), "a\"<b>", map[string]string{"k": "v"}, []int{1},
		"", "plain", "é", "\u2028", map[string]string{}, map[string]string(nil), map[string]string{"b": "2", "a": "1", "c/d.e": "x"}, map[string]string{"a": "<"}} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonValue(v); string(got) != string(want) {
			t.Errorf("jsonValue(%#v) = %s, want %s", v, got, want)
		}
	}
}

// The rule a change is made with is recorded, its fixed reason is not, and a change found again merges
// with its record.
func TestRuleIsRecorded(t *testing.T) {
	fresh := []Change{{Action: Rewrite, Path: "spec.dnsPolicy", From: jsonValue("ClusterFirstWithHostNet"), To: jsonValue("ClusterFirst"), Reason: ReasonDNSPolicy, Rule: RuleDNSPolicy}}
	record := EncodeChanges(fresh)
	if want := `{"v":3,"c":[["r",null,"ClusterFirstWithHostNet","ClusterFirst","dns-policy"]]}`; record != want {
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
