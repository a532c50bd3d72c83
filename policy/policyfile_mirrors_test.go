package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRegistryMirrorsValidate(t *testing.T) {
	for _, tc := range []struct{ name, mirrors, want string }{
		{"valid", `[{registry: mcr.microsoft.com, mirrors: [{host: "registry.internal:5000", capabilities: [pull, resolve]}, {host: "[fd00::1]:443", repositoryPrefix: mcr-proxy/windows}], airGapped: true}, {registry: _default, mirrors: [{host: all.internal}]}, {registry: "registry.internal:5000", mirrors: []}]`, ""},
		{"scheme", `[{registry: mcr.microsoft.com, mirrors: [{host: "https://m.example"}]}]`, `registryMirrors[0].mirrors[0].host: Invalid value: "https://m.example": a host[:port] alone`},
		{"upper case", `[{registry: MCR.microsoft.com, mirrors: [{host: m.example}]}]`, `registryMirrors[0].registry: Invalid value: "MCR.microsoft.com": not a host name`},
		{"port", `[{registry: mcr.microsoft.com, mirrors: [{host: "m.example:0"}]}]`, "the port must be a number from 1 to 65535"},
		{"ipv6 without brackets end", `[{registry: mcr.microsoft.com, mirrors: [{host: "[fd00::1"}]}]`, "must end with ]"},
		{"capability", `[{registry: mcr.microsoft.com, mirrors: [{host: m.example, capabilities: [pull, push]}]}]`, `registryMirrors[0].mirrors[0].capabilities[1]: Unsupported value: "push": supported values: "pull", "resolve"`},
		{"capability twice", `[{registry: mcr.microsoft.com, mirrors: [{host: m.example, capabilities: [pull, pull]}]}]`, `capabilities[1]: Duplicate value: "pull"`},
		{"prefix", `[{registry: mcr.microsoft.com, mirrors: [{host: m.example, repositoryPrefix: "/MCR"}]}]`, `registryMirrors[0].mirrors[0].repositoryPrefix: Invalid value: "/MCR"`},
		{"registry twice", `[{registry: docker.io, mirrors: [{host: a.example}]}, {registry: index.docker.io, mirrors: [{host: b.example}]}]`, `registryMirrors[1].registry: Duplicate value: "index.docker.io (also entry 0)"`},
		{"mirror twice", `[{registry: mcr.microsoft.com, mirrors: [{host: m.example}, {host: m.example}]}]`, `registryMirrors[0].mirrors[1]: Duplicate value: "m.example"`},
		{"air-gapped without mirrors", `[{registry: mcr.microsoft.com, airGapped: true}]`, "registryMirrors[0].mirrors: Required value: airGapped with no mirror"},
		{"too many sources", `[{registry: mcr.microsoft.com, mirrors: [{host: a.example}, {host: b.example}, {host: c.example}, {host: d.example}]}]`, "registryMirrors[0].mirrors: Too many: 4: must have at most 3 items"},
		{"four air-gapped", `[{registry: mcr.microsoft.com, mirrors: [{host: a.example}, {host: b.example}, {host: c.example}, {host: d.example}], airGapped: true}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(policyHeader + "registryMirrors: " + tc.mirrors + "\n"))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestMirrorCan: a tag needs pull and resolve, a digest pull; no capabilities means both, as hosts.toml.
func TestMirrorCan(t *testing.T) {
	for _, tc := range []struct {
		caps        []string
		tag, digest bool
	}{
		{nil, true, true},
		{[]string{CapabilityPull, CapabilityResolve}, true, true},
		{[]string{CapabilityPull}, false, true},
		{[]string{CapabilityResolve}, false, false},
	} {
		m := Mirror{Host: "m.example", Capabilities: tc.caps}
		if m.Can(true) != tc.tag || m.Can(false) != tc.digest {
			t.Errorf("%v: tag %v digest %v, want %v %v", tc.caps, m.Can(true), m.Can(false), tc.tag, tc.digest)
		}
	}
}

// TestMirrorRecorded: an image a mirror answered is recorded and warned about, naming the mirror and
// the registry, with its rule; one its registry answered is not.
func TestMirrorRecorded(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{
		{Name: "web", Image: "mcr.microsoft.com/dotnet/aspnet:8.0"}, {Name: "side", Image: "example.com/side:1"}}}}
	win := []Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2849"}}
	facts := Facts{Operation: Create, Namespace: Namespace{Name: "web", Labels: map[string]string{LabelEnabled: "true"}}, Images: map[string]Image{
		"mcr.microsoft.com/dotnet/aspnet:8.0": {Platforms: win, Mirror: "registry.internal:5000", MirrorFor: "mcr.microsoft.com"},
		"example.com/side:1":                  {Platforms: win},
	}}
	d, err := Default().Decide(pod, facts)
	if err != nil {
		t.Fatal(err)
	}
	var found []Change
	for _, c := range d.Changes {
		if c.Rule == RuleImageMirror {
			found = append(found, c)
		}
	}
	if len(found) != 1 || found[0].Path != "spec.containers[web].image" || found[0].Reason != "read from mirror registry.internal:5000 for mcr.microsoft.com" {
		t.Fatalf("mirror changes %+v, want one for containers[web]", found)
	}
	if !strings.Contains(strings.Join(d.Warnings(), "\n"), "wincompat: image in containers[web]: read from mirror registry.internal:5000 for mcr.microsoft.com") {
		t.Errorf("warnings %q do not name the mirror", d.Warnings())
	}
	if !strings.Contains(pod.Annotations[AnnotationChanges], "read from mirror registry.internal:5000") {
		t.Errorf("record %s does not name the mirror", pod.Annotations[AnnotationChanges])
	}
	if f := found[0].MetricField(); f != "spec.containers[*].image" {
		t.Errorf("metric field %q", f)
	}
}
