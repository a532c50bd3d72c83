package perf

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// floorYAML is the floor engine: a MutatingAdmissionPolicy written for the chart pod's rewrite alone,
// and its binding (floor.yaml says what it does and does not do).
//
//go:embed floor.yaml
var floorYAML []byte

// FloorPolicy returns the floor engine's policy and binding, as floor.yaml writes them.
func FloorPolicy() (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	docs := bytes.Split(floorYAML, []byte("\n---\n"))
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("floor.yaml: %d documents, want a policy and its binding", len(docs))
	}
	var p admissionregistrationv1.MutatingAdmissionPolicy
	var b admissionregistrationv1.MutatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict(docs[0], &p); err != nil {
		return nil, nil, fmt.Errorf("floor.yaml, the policy: %w", err)
	}
	if err := yaml.UnmarshalStrict(docs[1], &b); err != nil {
		return nil, nil, fmt.Errorf("floor.yaml, the binding: %w", err)
	}
	if p.Kind != "MutatingAdmissionPolicy" || b.Kind != "MutatingAdmissionPolicyBinding" || b.Spec.PolicyName != p.Name {
		return nil, nil, fmt.Errorf("floor.yaml: a %s %s and a %s %s of %s", p.Kind, p.Name, b.Kind, b.Name, b.Spec.PolicyName)
	}
	return &p, &b, nil
}

// FloorSwitch binds and unbinds the floor engine's policy, which stays created, as
// AdmissionPolicySwitch does wincompat's.
type FloorSwitch struct {
	cs      kubernetes.Interface
	binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// NewFloorSwitch creates the floor engine's policy, unbound.
func NewFloorSwitch(ctx context.Context, cs kubernetes.Interface) (*FloorSwitch, error) {
	p, b, err := FloorPolicy()
	if err != nil {
		return nil, err
	}
	if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating MutatingAdmissionPolicy %s: %w", p.Name, err)
	}
	return &FloorSwitch{cs: cs, binding: b}, nil
}

// Apply binds (on) or unbinds the policy.
func (s *FloorSwitch) Apply(ctx context.Context, on bool) error {
	api := s.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	var err error
	if on {
		_, err = api.Create(ctx, s.binding.DeepCopy(), metav1.CreateOptions{})
	} else {
		err = api.Delete(ctx, s.binding.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
