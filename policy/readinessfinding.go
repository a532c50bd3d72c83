package policy

import "encoding/json"

// readinessFinding is one thing a run-time readiness check found: where (a record path naming
// containers and volumes by name) and what (the value found, recorded as the change's From).
type readinessFinding struct {
	Path  string
	Value json.RawMessage
}
