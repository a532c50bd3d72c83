package policy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAllowedOS(t *testing.T) {
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	affinity := func(terms ...[]corev1.NodeSelectorRequirement) *corev1.Affinity {
		var ts []corev1.NodeSelectorTerm
		for _, t := range terms {
			ts = append(ts, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts}}}
	}
	const os = corev1.LabelOSStable
	for name, tc := range map[string]struct {
		spec corev1.PodSpec
		want osSet
	}{
		"nothing":                      {corev1.PodSpec{}, anyOS},
		"selector windows":             {corev1.PodSpec{NodeSelector: map[string]string{os: "windows"}}, osSet{windows: true}},
		"beta selector linux":          {corev1.PodSpec{NodeSelector: map[string]string{"beta.kubernetes.io/os": "linux"}}, osSet{linux: true}},
		"selector on arch only":        {corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelArchStable: "amd64"}}, anyOS},
		"affinity In windows":          {corev1.PodSpec{Affinity: affinity([]corev1.NodeSelectorRequirement{req(os, corev1.NodeSelectorOpIn, "windows")})}, osSet{windows: true}},
		"affinity NotIn linux":         {corev1.PodSpec{Affinity: affinity([]corev1.NodeSelectorRequirement{req(os, corev1.NodeSelectorOpNotIn, "linux")})}, osSet{windows: true}},
		"affinity In both":             {corev1.PodSpec{Affinity: affinity([]corev1.NodeSelectorRequirement{req(os, corev1.NodeSelectorOpIn, "linux", "windows")})}, anyOS},
		"terms are alternatives":       {corev1.PodSpec{Affinity: affinity([]corev1.NodeSelectorRequirement{req(os, corev1.NodeSelectorOpIn, "windows")}, []corev1.NodeSelectorRequirement{req(os, corev1.NodeSelectorOpIn, "linux")})}, anyOS},
		"a term without os allows all": {corev1.PodSpec{Affinity: affinity([]corev1.NodeSelectorRequirement{req(os, corev1.NodeSelectorOpIn, "windows")}, []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpExists)})}, anyOS},
		"DoesNotExist allows none":     {corev1.PodSpec{Affinity: affinity([]corev1.NodeSelectorRequirement{req(os, corev1.NodeSelectorOpDoesNotExist)})}, osSet{}},
		"selector and affinity agree":  {corev1.PodSpec{NodeSelector: map[string]string{os: "linux"}, Affinity: affinity([]corev1.NodeSelectorRequirement{req(os, corev1.NodeSelectorOpIn, "linux", "windows")})}, osSet{linux: true}},
	} {
		if got := allowedOS(&tc.spec); got != tc.want {
			t.Errorf("%s: allowedOS = %+v, want %+v", name, got, tc.want)
		}
	}
}
