package policy

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestNewerRevisionWarned: the warning appears exactly when the entry a node of the chosen build would
// run is of that build and of a newer revision than every ready node of it.
func TestNewerRevisionWarned(t *testing.T) {
	p := Default()
	for _, c := range []struct {
		name      string
		builds    []string
		revisions map[string]int
		entries   []string
		want      bool
	}{
		{"newer than every node", []string{"10.0.20348"}, map[string]int{"10.0.20348": 2762}, []string{"10.0.20348.2900"}, true},
		{"as new as the newest node", []string{"10.0.20348"}, map[string]int{"10.0.20348": 2900}, []string{"10.0.20348.2900"}, false},
		{"older than the nodes", []string{"10.0.20348"}, map[string]int{"10.0.20348": 3000}, []string{"10.0.20348.2900"}, false},
		{"nodes report no revision", []string{"10.0.20348"}, nil, []string{"10.0.20348.2900"}, false},
		// A 2022 image on a 2025 node: another build, whose revisions do not compare.
		{"another build", []string{"10.0.26100"}, map[string]int{"10.0.26100": 1}, []string{"10.0.20348.2900"}, false},
		// containerd takes the highest os.version the host runs: the 2025 entry, of a newer revision.
		{"the entry containerd picks", []string{"10.0.26100"}, map[string]int{"10.0.26100": 1742}, []string{"10.0.20348.9999", "10.0.26100.2000"}, true},
		{"an image without os.version", []string{"10.0.20348"}, map[string]int{"10.0.20348": 1}, []string{""}, false},
	} {
		img := Image{}
		for _, v := range c.entries {
			img.Platforms = append(img.Platforms, Platform{OS: "windows", Architecture: "amd64", OSVersion: v})
		}
		pod := &corev1.Pod{Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
		d, err := p.Decide(pod, Facts{Operation: Create, Namespace: Namespace{Name: "web", Labels: map[string]string{LabelEnabled: "true"}},
			Cluster: &Cluster{Builds: c.builds, Revisions: c.revisions}, Images: map[string]Image{"app:1": img}})
		if err != nil {
			t.Fatal(err)
		}
		got := slices.ContainsFunc(d.Changes, func(ch Change) bool { return ch.Rule == RuleImageNewerRevision })
		if got != c.want {
			t.Errorf("%s: warned %v, want %v (%v)", c.name, got, c.want, d.Warnings())
		}
		// The audit's question of one node, where the node reports a revision.
		if r, known := c.revisions[c.builds[0]]; known {
			if ahead := p.RevisionsAhead(&pod.Spec, map[string]Image{"app:1": img}, c.builds[0], r); (len(ahead) > 0) != c.want {
				t.Errorf("%s: RevisionsAhead %v, want a finding %v", c.name, ahead, c.want)
			}
		}
	}
}
