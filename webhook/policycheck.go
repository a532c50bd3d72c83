package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/wincompat/wincompat/policy"
)

// PolicyCheckPath validates the policy ConfigMap before the API server stores it.
const PolicyCheckPath = "/validate-policy"

// PolicyKey is the ConfigMap key that holds the policy file.
const PolicyKey = "policy.yaml"

// PolicyCheck refuses a policy ConfigMap whose policy.yaml the server would refuse to load, with the
// loader's own message: the line and path of an unknown, repeated or misshapen key, the path of an
// invalid value and what to write instead. It is the same strict loader, over the same schema (the
// policy.Policy type), that the server, `wincompat mutate --policy` and `wincompat policy` use, so there
// is no second schema to drift.
type PolicyCheck struct{}

// Handle answers one review; anything but a ConfigMap is a configuration mistake, refused by name.
func (PolicyCheck) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "ConfigMap" || req.Kind.Group != "" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("wincompat validates policy ConfigMaps only, got %s; check the ValidatingWebhookConfiguration rules", req.Kind))
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(req.Object.Raw, &cm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the ConfigMap: %w", err))
	}
	data, ok := cm.Data[PolicyKey]
	if !ok {
		return admission.Denied(fmt.Sprintf("wincompat: ConfigMap %s/%s holds wincompat's policy and needs the key %s (a Policy: apiVersion wincompat.io/v1alpha1, kind Policy; see `wincompat policy`)", req.Namespace, req.Name, PolicyKey))
	}
	if _, err := policy.Load([]byte(data)); err != nil {
		return admission.Denied(fmt.Sprintf("wincompat: %s in ConfigMap %s/%s is not a valid policy, so it was not stored and the policy in force stays: %v", PolicyKey, req.Namespace, req.Name, err))
	}
	return admission.Allowed("")
}
