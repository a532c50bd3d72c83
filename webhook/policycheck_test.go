package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestPolicyCheck(t *testing.T) {
	review := func(kind string, data map[string]string) admission.Request {
		raw, _ := json.Marshal(&corev1.ConfigMap{Data: data})
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: kind}, Namespace: "wincompat-system", Name: "wincompat-policy",
			Object: runtime.RawExtension{Raw: raw},
		}}
	}
	for _, tc := range []struct {
		name    string
		req     admission.Request
		allowed bool
		says    []string // in the message
	}{
		{"valid", review("ConfigMap", map[string]string{PolicyKey: "apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: arm64\n"}), true, nil},
		{"unknown key", review("ConfigMap", map[string]string{PolicyKey: "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaint: []\n"}), false,
			[]string{"wincompat-system/wincompat-policy", `unknown key "windowsNodeTaint"`, "windowsNodeTaints", "the policy in force stays"}},
		{"bad value", review("ConfigMap", map[string]string{PolicyKey: "apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: sparc\n"}), false, []string{"arch"}},
		{"bad value in a list", review("ConfigMap", map[string]string{PolicyKey: "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds:\n- build: 10.0.20348\n- build: \"2022\"\n"}), false,
			[]string{`builds[1].build: Invalid value: "2022": not a Windows build number like 10.0.20348`}},
		{"repeated key", review("ConfigMap", map[string]string{PolicyKey: "apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: amd64\narch: arm64\n"}), false,
			[]string{`line 4: duplicate key "arch" (first at line 3)`}},
		{"no key", review("ConfigMap", map[string]string{"other": "x"}), false, []string{"needs the key policy.yaml"}},
		{"not a ConfigMap", review("Secret", nil), false, []string{"policy ConfigMaps only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := PolicyCheck{}.Handle(context.Background(), tc.req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			for _, s := range tc.says {
				if !strings.Contains(resp.Result.Message, s) {
					t.Errorf("message %q does not say %q", resp.Result.Message, s)
				}
			}
		})
	}
}
