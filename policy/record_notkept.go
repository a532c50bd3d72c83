package policy

import "encoding/json"

// FromNotKept is what a record holds as the old value of a field whose value its writer could not keep:
// the admission policies build the record in CEL, which has no JSON encoder, so the strip of a list or
// an object (seccompProfile, capabilities, sysctls, ...) writes this instead of the value. It is a JSON
// string where the field holds a list or an object, so no value of the field reads as it, and a
// printer of "from" shows it as it is. A record written before it holds null there: no value written.
const FromNotKept = `"(not kept)"`

// FromKept says whether c's From holds the field's old value: not when none was recorded, nor when its
// writer could not keep it (FromNotKept).
func (c Change) FromKept() bool {
	return len(c.From) > 0 && string(c.From) != "null" && string(c.From) != FromNotKept
}

// AsRecordedInCEL is c as the admission policies record the same change: the old value of a list or
// an object not kept. Comparing the two engines' records goes through it.
func AsRecordedInCEL(c Change) Change {
	if len(c.From) > 0 && (c.From[0] == '{' || c.From[0] == '[') {
		c.From = json.RawMessage(FromNotKept)
	}
	return c
}
