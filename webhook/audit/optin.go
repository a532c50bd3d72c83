package audit

import "github.com/wincompat/wincompat/policy"

// reportOptInMistakes reports each namespace label that was plausibly meant to opt the namespace in or
// to configure it, and that wincompat does not act on (policy.NamespaceOptInMistakes), with the command
// that fixes it: such a namespace is out of scope without a word, and its Windows pods then fail on
// the API server's own refusal of a Linux-only field. It needs no Windows pod yet: namespaces are
// labelled before anything is deployed there. A namespace the policy excludes is left out: labelling
// it would change nothing.
func reportOptInMistakes(pol *policy.Policy, n *namespaces, out *sink) {
	for _, name := range n.names() {
		if n.labelsUnknown[name] || pol.Scope(nil, policy.Namespace{Name: name}) == policy.ExcludedNamespace {
			continue
		}
		for _, m := range policy.NamespaceOptInMistakes(n.facts(name).Labels) {
			out.finding(NamespaceOptInMistake, name, "", m.String()+": "+m.Command(name))
		}
	}
}
