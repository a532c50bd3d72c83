package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wincompat/wincompat/policy"
)

// mutate is MutateResolving without a resolver or a deadline, as the offline tests want it.
func mutate(pol *policy.Policy, gvk schema.GroupVersionKind, raw []byte, facts policy.Facts) (Result, error) {
	return MutateResolving(context.Background(), pol, gvk, raw, facts, nil)
}
