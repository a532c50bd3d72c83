package policy

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCheckBuilds(t *testing.T) {
	p := Default()
	win := func(v string) Platform { return Platform{OS: "windows", Architecture: "amd64", OSVersion: v} }
	images := map[string]Image{
		"app:2019":  {Platforms: []Platform{win("10.0.17763.5830")}},
		"app:multi": {Platforms: []Platform{win("10.0.17763.5830"), win("10.0.20348.2227")}},
		"app:2022":  {Platforms: []Platform{win("10.0.20348.2227")}},
		"linux:1":   {Platforms: []Platform{{OS: "linux", Architecture: "amd64"}}},
		"timeout:1": {Err: "timed out"},
		"app:any":   {Platforms: []Platform{{OS: "windows", Architecture: "amd64"}}},
	}
	pod := func(images ...string) *corev1.PodSpec {
		s := &corev1.PodSpec{}
		for _, i := range images {
			s.Containers = append(s.Containers, corev1.Container{Name: "c" + string(rune('0'+len(s.Containers))), Image: i})
		}
		return s
	}
	pinned := pod("app:multi")
	pinned.NodeSelector = map[string]string{corev1.LabelWindowsBuild: "10.0.17763"}
	affinity := pod("app:any")
	affinity.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{"10.0.17763", "10.0.20348"}}}}}}}}
	excluding := pod("app:any")
	excluding.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{"10.0.17763"}},
			{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{"10.0.20348"}}}}}}}}
	only2025 := []string{"10.0.26100"}
	for name, c := range map[string]struct {
		spec     *corev1.PodSpec
		builds   []string
		runnable []string
		reasons  int
	}{
		"2019 image on 2025":             {pod("app:2019"), only2025, nil, 1},
		"2022 image on 2025":             {pod("app:2022"), only2025, []string{"10.0.26100"}, 0},
		"multi image on 2025":            {pod("app:multi"), only2025, []string{"10.0.26100"}, 0},
		"pinned to 2019":                 {pinned, []string{"10.0.20348", "10.0.26100"}, nil, 1},
		"affinity 2019/2022 on 2022+25":  {affinity, []string{"10.0.20348", "10.0.26100"}, []string{"10.0.20348"}, 1},
		"linux-only image":               {pod("app:2022", "linux:1"), only2025, nil, 1},
		"no answer, tag names no build":  {pod("timeout:1"), only2025, []string{"10.0.26100"}, 0},
		"tag names 2019 (ltsc2019)":      {pod("mcr.microsoft.com/windows/nanoserver:ltsc2019"), only2025, nil, 1},
		"2019 and 2022 containers on 19": {pod("app:2019", "app:2022"), []string{"10.0.17763"}, nil, 1},
		"affinity that allows no build":  {excluding, []string{"10.0.17763", "10.0.20348"}, nil, 1},
	} {
		got := p.CheckBuilds(c.spec, images, c.builds)
		if !reflect.DeepEqual(got.Runnable, c.runnable) || len(got.Reasons) != c.reasons {
			t.Errorf("%s: got %+v, want runnable %v and %d reasons", name, got, c.runnable, c.reasons)
		}
	}
}

func TestPinnedBuilds(t *testing.T) {
	in := func(values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	zone := corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}
	spec := func(selector string, terms ...[]corev1.NodeSelectorRequirement) *corev1.PodSpec {
		s := &corev1.PodSpec{}
		if selector != "" {
			s.NodeSelector = map[string]string{corev1.LabelWindowsBuild: selector}
		}
		if len(terms) > 0 {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
			for _, e := range terms {
				s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
					s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: e})
			}
		}
		return s
	}
	for name, c := range map[string]struct {
		spec *corev1.PodSpec
		want []string // nil: not limited
	}{
		"nothing":                                     {spec(""), nil},
		"a nodeSelector":                              {spec("10.0.17763"), []string{"10.0.17763"}},
		"one term":                                    {spec("", []corev1.NodeSelectorRequirement{zone, in("10.0.17763", "10.0.20348")}), []string{"10.0.17763", "10.0.20348"}},
		"two terms: the union":                        {spec("", []corev1.NodeSelectorRequirement{in("10.0.17763")}, []corev1.NodeSelectorRequirement{in("10.0.26100")}), []string{"10.0.17763", "10.0.26100"}},
		"a term that says nothing allows all":         {spec("", []corev1.NodeSelectorRequirement{in("10.0.17763")}, []corev1.NodeSelectorRequirement{zone}), nil},
		"expressions of a term intersect":             {spec("", []corev1.NodeSelectorRequirement{in("10.0.17763", "10.0.20348"), in("10.0.20348")}), []string{"10.0.20348"}},
		"expressions that exclude each other":         {spec("", []corev1.NodeSelectorRequirement{in("10.0.17763"), in("10.0.20348")}), []string{}},
		"a nodeSelector outside the affinity":         {spec("10.0.26100", []corev1.NodeSelectorRequirement{in("10.0.17763")}), []string{}},
		"a nodeSelector and a term that says nothing": {spec("10.0.26100", []corev1.NodeSelectorRequirement{zone}), []string{"10.0.26100"}},
	} {
		got := PinnedBuilds(c.spec)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: PinnedBuilds = %#v, want %#v", name, got, c.want)
		}
	}
}
