package admissionpolicy

import (
	"fmt"

	"github.com/wincompat/wincompat/policy"
)

// Which objects the policies act on, as CEL (policy/placement_scope.go: Scope). The namespaces are
// the bindings' (renderBinding); the skip label is read here, in a matchCondition.

// notSkipped: neither the object nor its pod template is labelled wincompat.io/skip=true (the webhook's
// objectSelector reads the object's labels, the policy the template's).
func notSkipped(s shape) string {
	cond := fmt.Sprintf("object.metadata.?labels[?%s].orValue('') != 'true'", quote(policy.LabelSkip))
	if !s.pod {
		cond += fmt.Sprintf(" && %s.?labels[?%s].orValue('') != 'true'", optional(s.meta), quote(policy.LabelSkip))
	}
	return cond
}
