package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
)

// policyKeeper keeps the MutatingAdmissionPolicies of the hybrid engine as the current policy renders
// them: at start, whenever the policy file changes, and every resync against drift. It runs on the
// leader. With every replica gone the policies stay as last applied, which is the point: the API server
// keeps doing the static part alone.
//
// With the bindings installed by someone else (the chart), each policy is written only while its binding
// exists, and owned by it: the garbage collector deletes the policies when helm deletes the bindings
// (helm uninstall, or an upgrade to the webhook engine), whether or not a replica still runs. A policy
// written from a binding read just before its deletion names an owner that is gone, which the garbage
// collector also deletes. The keeper reads the ten bindings every check interval (sooner while one is
// missing), and writes the policies again when a binding appears or is replaced (deleted and created
// again: its policy went with the old one).
type policyKeeper struct {
	client  client.Client
	policy  func() *policy.Policy
	opts    admissionpolicy.Options
	trigger <-chan struct{}
	resync  time.Duration
	log     logr.Logger
	// policiesOnly: the bindings are installed (the chart's, with their scope fixed there); apply only
	// the policies, each owned by its binding.
	policiesOnly bool
	// bindings reads the installed bindings from the API server by name (no cache: RBAC grants get on
	// the ten names only, no list or watch).
	bindings client.Reader
	// check is how often the installed bindings are read; retry how soon after a pass that found one
	// missing (doubling up to check): the chart creates the bindings with the Deployment, and a replica
	// may be first.
	check, retry time.Duration
	// owners is the UID of the binding each policy was last written with, "" when it was missing.
	owners map[string]types.UID
}

// admissionPoliciesServed reports whether the API server serves MutatingAdmissionPolicy v1 (Kubernetes
// 1.36 and later), asked of its discovery rather than inferred from its version. Where it does not, the
// hybrid engine cannot install its policies: it says so once, at start-up, and the webhook, which does
// the whole rewrite anyway, goes on alone. A discovery failure is not a "no": the keeper then runs and
// retries as it would after any failed write.
func admissionPoliciesServed(m interface{ GetRESTMapper() meta.RESTMapper }, log logr.Logger) bool {
	gk := schema.GroupKind{Group: admissionregistrationv1.GroupName, Kind: "MutatingAdmissionPolicy"}
	_, err := m.GetRESTMapper().RESTMapping(gk, admissionregistrationv1.SchemeGroupVersion.Version)
	if meta.IsNoMatchError(err) {
		log.Error(err, "The API server does not serve MutatingAdmissionPolicy v1 (Kubernetes 1.36 and later): "+
			"--engine=hybrid runs as the webhook alone here, and nothing mutates Windows pods while no replica answers. "+
			"Use --engine=webhook (the chart's engine: auto or webhook) so that the Windows webhooks fail closed")
		return false
	}
	return true
}

// fieldOwner is wincompat's name in the policies' managed fields (server-side apply).
const fieldOwner = "wincompat"

func (k *policyKeeper) Start(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var check *time.Timer
	var checkC <-chan time.Time
	if k.policiesOnly {
		check = time.NewTimer(k.check)
		defer check.Stop()
		checkC = check.C
	}
	wait := k.retry
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.trigger:
		case <-timer.C:
		case <-checkC:
			moved, missing := k.bindingsMoved(ctx)
			if !moved {
				if missing {
					wait = min(2*wait, k.check)
					check.Reset(wait)
				} else {
					check.Reset(k.check)
				}
				continue
			}
		}
		missing, err := k.apply(ctx)
		if err != nil {
			// Retried at the next resync or policy change; admission goes on with what is applied.
			k.log.Error(err, "Applying the admission policies failed")
		}
		timer.Reset(k.resync)
		if check != nil {
			wait = k.retry
			if missing == 0 {
				wait = k.check
			}
			check.Reset(wait)
		}
	}
}

// bindingsMoved reads the installed bindings: moved when one exists that the policies were not written
// with (it appeared, or was replaced), missing when one does not exist. A failed read is neither: the
// next check reads again.
func (k *policyKeeper) bindingsMoved(ctx context.Context) (moved, missing bool) {
	for name, uid := range k.owners {
		switch b, err := k.installedBinding(ctx, name); {
		case err != nil:
			k.log.V(1).Info("Reading an admission policy binding failed", "binding", name, "error", err.Error())
		case b == nil:
			missing = true
		case b.UID != uid && b.DeletionTimestamp == nil:
			moved = true
		}
	}
	return moved, missing
}

// NeedLeaderElection: one replica writes the policies.
func (k *policyKeeper) NeedLeaderElection() bool { return true }

// apply writes every policy (and binding, unless installed), and returns how many policies it left out
// because their installed binding does not exist.
func (k *policyKeeper) apply(ctx context.Context) (missing int, err error) {
	policies, bindings := admissionpolicy.Render(k.policy(), k.opts)
	var errs []error
	var waiting []string
	for i := range policies {
		// Each policy before its binding: a binding to a missing policy is ignored, but the other order
		// would leave a moment where the new binding selects an old policy.
		objs := []client.Object{&policies[i], &bindings[i]}
		if k.policiesOnly {
			owner, err := k.installedBinding(ctx, bindings[i].Name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if k.owners == nil {
				k.owners = map[string]types.UID{}
			}
			if owner == nil || owner.DeletionTimestamp != nil {
				k.owners[bindings[i].Name] = ""
				waiting = append(waiting, bindings[i].Name)
				continue
			}
			// No blockOwnerDeletion: nothing waits for the policy to go, and setting it would need the
			// RBAC to update the binding's finalizers.
			if err := controllerutil.SetOwnerReference(owner, &policies[i], k.client.Scheme()); err != nil {
				errs = append(errs, err)
				continue
			}
			objs = objs[:1]
		}
		for _, obj := range objs {
			//nolint:staticcheck // client.Apply with a typed object is the documented server-side apply for built-in types here.
			if err := k.client.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
				errs = append(errs, fmt.Errorf("%T %s: %w", obj, obj.GetName(), err))
			} else if k.policiesOnly {
				k.owners[bindings[i].Name] = policies[i].OwnerReferences[0].UID
			}
		}
	}
	if len(waiting) > 0 {
		k.log.Info("Admission policies not applied: their bindings are not installed (yet)", "bindings", waiting)
	}
	if err := errors.Join(errs...); err != nil {
		return len(waiting), err
	}
	k.log.Info("Admission policies applied", "policies", len(policies)-len(waiting))
	return len(waiting), nil
}

// installedBinding reads the installed binding of that name from the API server; nil when it does not
// exist.
func (k *policyKeeper) installedBinding(ctx context.Context, name string) (*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	var b admissionregistrationv1.MutatingAdmissionPolicyBinding
	switch err := k.bindings.Get(ctx, client.ObjectKey{Name: name}, &b); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading MutatingAdmissionPolicyBinding %s: %w", name, err)
	}
	return &b, nil
}
