package policy

// ReadinessRules are the rules of the run-time readiness table, in its order: what a reader of the
// records (the audit) needs to tell a readiness warning from the others (RuleOf) and to name one
// finding per rule, so that a new row of the table needs no edit there.
func ReadinessRules() []Rule {
	rules := make([]Rule, len(readinessChecks))
	for i := range readinessChecks {
		rules[i] = readinessChecks[i].rule
	}
	return rules
}
