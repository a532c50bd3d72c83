package policy

import (
	"encoding/json"
	"testing"
)

// The admission policies' strip of an object keeps no old value, and the record says so: the marker
// reads back as a change whose old value was not kept, unlike a value that was kept, and the record
// written again from the changes is the same bytes.
func TestRecordSaysAnOldValueWasNotKept(t *testing.T) {
	record := RecordPrefix + `"c":[["s","spec.containers[app]",{"seccompProfile":` + FromNotKept + `,"runAsUser":1001}]]}`
	changes, err := DecodeChanges(record)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 {
		t.Fatalf("%s reads back as %d changes: %+v", record, len(changes), changes)
	}
	seccomp, user := changes[0], changes[1]
	if string(seccomp.From) != FromNotKept || seccomp.FromKept() {
		t.Errorf("seccompProfile reads back from %s (kept: %v), want the marker, not kept", seccomp.From, seccomp.FromKept())
	}
	if string(user.From) != "1001" || !user.FromKept() {
		t.Errorf("runAsUser reads back from %s (kept: %v), want 1001, kept", user.From, user.FromKept())
	}
	if again := EncodeChanges(changes); again != record {
		t.Errorf("written again as\n %s\nwant\n %s", again, record)
	}
	// What the webhook records of the same strip, as the admission policies record it.
	webhook := Change{Action: Strip, Path: "spec.containers[app].securityContext.seccompProfile", From: json.RawMessage(`{"type":"RuntimeDefault"}`), Reason: ReasonLinuxOnly}
	if got := AsRecordedInCEL(webhook); string(got.From) != FromNotKept || !got.equal(seccomp) {
		t.Errorf("the webhook's strip as the admission policies record it: %+v, want %+v", got, seccomp)
	}
	// A record written before the marker: null, no value written.
	old, err := DecodeChanges(RecordPrefix + `"c":[["s","spec.containers[app]",{"seccompProfile":null}]]}`)
	if err != nil || len(old) != 1 || old[0].FromKept() || len(old[0].From) != 0 {
		t.Errorf("a null old value reads back as %+v (%v), want none", old, err)
	}
}
