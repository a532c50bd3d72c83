package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
)

// policyKeeper keeps the MutatingAdmissionPolicies of the hybrid engine as the current policy renders
// them: at start, whenever the policy file changes, and every resync against drift. It runs on the
// leader. With every replica gone the policies stay as last applied, which is the point: the API server
// keeps doing the static part alone.
type policyKeeper struct {
	client  client.Client
	policy  func() *policy.Policy
	opts    admissionpolicy.Options
	trigger <-chan struct{}
	resync  time.Duration
	log     logr.Logger
	// policiesOnly: the bindings are installed (the chart's, with their scope fixed there); apply only
	// the policies.
	policiesOnly bool
}

// fieldOwner is wincompat's name in the policies' managed fields (server-side apply).
const fieldOwner = "wincompat"

func (k *policyKeeper) Start(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.trigger:
		case <-timer.C:
		}
		if err := k.apply(ctx); err != nil {
			// Retried at the next resync or policy change; admission goes on with what is applied.
			k.log.Error(err, "Applying the admission policies failed")
		}
		timer.Reset(k.resync)
	}
}

// NeedLeaderElection: one replica writes the policies.
func (k *policyKeeper) NeedLeaderElection() bool { return true }

func (k *policyKeeper) apply(ctx context.Context) error {
	policies, bindings := admissionpolicy.Render(k.policy(), k.opts)
	var errs []error
	for i := range policies {
		// Each policy before its binding: a binding to a missing policy is ignored, but the other order
		// would leave a moment where the new binding selects an old policy.
		objs := []client.Object{&policies[i], &bindings[i]}
		if k.policiesOnly {
			objs = objs[:1]
		}
		for _, obj := range objs {
			//nolint:staticcheck // client.Apply with a typed object is the documented server-side apply for built-in types here.
			if err := k.client.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
				errs = append(errs, fmt.Errorf("%T %s: %w", obj, obj.GetName(), err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	k.log.Info("Admission policies applied", "policies", len(policies))
	return nil
}
