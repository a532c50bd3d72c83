package server

import (
	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// With --engine=hybrid the API server does the static part itself, through the MutatingAdmissionPolicies
// of policy/admissionpolicy. wincompat writes none of them: the chart installs the policies, their
// bindings and the params ConfigMap the policies read the policy's values from (`wincompat policy
// export` prints the same for other installs). No admission control sees writes of admission policies
// or bindings (the API server exempts them), so RBAC is all that bounds them, and it cannot bound their
// content: a ServiceAccount allowed to write one policy could rewrite every pod it binds. So wincompat's
// has no access to them at all.

// admissionPoliciesServed reports whether the API server serves MutatingAdmissionPolicy v1 (Kubernetes
// 1.36 and later), asked of its discovery rather than inferred from its version. Where it does not, the
// hybrid engine has no policies to lean on: it says so once, at start-up, and the webhook, which does
// the whole rewrite anyway, goes on alone. A discovery failure is not a "no".
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
