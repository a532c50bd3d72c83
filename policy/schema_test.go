package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

const header = "apiVersion: wincompat.io/v1alpha1\nkind: Policy\n"

// A user's file over the defaults: a key it names replaces the default (a list as a whole, even with
// []), a key it leaves out or sets to null keeps the default. The scalars read as YAML 1.2 reads them,
// so a taint value "yes" stays "yes" and an unquoted 2019 is the name "2019".
func TestLoadOverlaySemantics(t *testing.T) {
	def := Default()
	for _, tc := range []struct {
		name, file string
		want       func(p *Policy)
	}{
		{"nothing named", "", func(*Policy) {}},
		{"a scalar replaces", "arch: arm64\npodSecurityRestricted: false\n", func(p *Policy) { p.Arch, p.PodSecurityRestricted = "arm64", false }},
		{"null keeps the default", "arch: ~\nnonRootUserName:\nsetRuntimeClassName: null\nbuilds: ~\nwindowsNodeTaints:\n", func(*Policy) {}},
		{"an empty string is a value", "nonRootUserName: \"\"\n", func(p *Policy) { p.NonRootUserName = "" }},
		{"a list replaces the whole list", "windowsNodeTaints: [{key: sku, value: win, effect: NoExecute}]\nexcludedNamespaces: [apps]\n", func(p *Policy) {
			p.WindowsNodeTaints = []corev1.Taint{{Key: "sku", Value: "win", Effect: corev1.TaintEffectNoExecute}}
			p.ExcludedNamespaces = []string{"apps"}
		}},
		{"[] empties a list", "injectorOptOuts: []\nexcludedNamespaces: []\nwindowsNodeTaints: []\nlinuxByDefaultExcludedNamespaces: []\n", func(p *Policy) {
			p.InjectorOptOuts, p.ExcludedNamespaces, p.WindowsNodeTaints, p.LinuxByDefaultExcludedNamespaces = []string{}, []string{}, []corev1.Taint{}, []string{}
		}},
		{"builds replace the catalog", "builds:\n- build: 10.0.20348\n  names: [2022, ltsc2022]\n  imageTags: [ltsc2022]\n  runtimeClassName: win22\ndefaultBuild: 2022\n", func(p *Policy) {
			p.Builds = []Build{{Number: "10.0.20348", Names: []string{"2022", "ltsc2022"}, ImageTags: []string{"ltsc2022"}, RuntimeClass: "win22"}}
			p.DefaultBuild = "10.0.20348"
		}},
		{"keys left out of a list item are empty", "builds: [{build: 10.0.17763}]\nwindowsNodeTaints: [{key: os, value: ~, effect: NoSchedule}]\n", func(p *Policy) {
			p.Builds = []Build{{Number: "10.0.17763"}}
			p.WindowsNodeTaints = []corev1.Taint{{Key: "os", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{"null items of a list are dropped", "excludedNamespaces: [a, ~, b]\n", func(p *Policy) { p.ExcludedNamespaces = []string{"a", "b"} }},
		{"scalars are text", "windowsNodeTaints: [{key: dedicated, value: yes, effect: NoSchedule}, {key: gpu, value: 1.10, effect: NoSchedule}]\nnonRootUserName: on\n", func(p *Policy) {
			p.WindowsNodeTaints = []corev1.Taint{{Key: "dedicated", Value: "yes", Effect: corev1.TaintEffectNoSchedule}, {Key: "gpu", Value: "1.10", Effect: corev1.TaintEffectNoSchedule}}
			p.NonRootUserName = "on"
		}},
		{"booleans as YAML 1.1 wrote them", "setRuntimeClassName: no\nlinuxByDefault: yes\npodImagePullSecrets: True\n", func(p *Policy) {
			p.SetRuntimeClassName, p.LinuxByDefault, p.PodImagePullSecrets = false, true, true
		}},
		{"anchors and merge keys", "excludedNamespaces: &ns [apps, web]\nlinuxByDefaultExcludedNamespaces: *ns\nbuilds:\n- &b {build: 10.0.20348, names: [ltsc2022], runtimeClassName: a}\n- {<<: *b, build: 10.0.26100, names: [ltsc2025]}\n", func(p *Policy) {
			p.ExcludedNamespaces, p.LinuxByDefaultExcludedNamespaces = []string{"apps", "web"}, []string{"apps", "web"}
			p.Builds = []Build{{Number: "10.0.20348", Names: []string{"ltsc2022"}, RuntimeClass: "a"}, {Number: "10.0.26100", Names: []string{"ltsc2025"}, RuntimeClass: "a"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load([]byte(header + tc.file))
			if err != nil {
				t.Fatal(err)
			}
			want := *def
			tc.want(&want)
			if !equality.Semantic.DeepEqual(got, &want) { // nil and [] are the same list
				t.Errorf("got  %+v\nwant %+v", got, &want)
			}
		})
	}
}

// Refused whatever the values: keys are case-sensitive, and a key named twice is an error, not "the
// last one wins".
func TestLoadRefusesUnknownAndDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"case matters", "Arch: arm64\n", `line 3: unknown key "Arch"`},
		{"duplicate", "arch: amd64\nmode: warn\narch: arm64\n", `line 5`},
		{"duplicate in a list item", "builds:\n- build: 10.0.20348\n  build: 10.0.17763\n", `line 5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(header + tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// The effective policy is printed with every key, in the order of default.yaml, an empty list as [] (so
// that it reads back as empty and not as "the default") and an empty string as "".
func TestPolicyYAMLFormat(t *testing.T) {
	p, err := Load([]byte(header + "arch: arm64\nwindowsNodeTaints: [{key: os, effect: NoSchedule}]\nbuilds: [{build: 10.0.20348}]\ninjectorOptOuts: []\nnonRootUserName: 'on'\n"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `apiVersion: wincompat.io/v1alpha1
kind: Policy
mode: enforce
inferOSFromNodeSelector: true
nonRootUserName: "on"
podSecurityRestricted: true
defaultBuild: ""
setRuntimeClassName: true
arch: arm64
runtimeClassHandler: runhcs-wcow-process
runtimeClassesFor: catalog
windowsNodeTaints:
  - key: os
    value: ""
    effect: NoSchedule
excludedNamespaces:
  - kube-system
builds:
  - build: 10.0.20348
    names: []
    imageTags: []
    runtimeClassName: ""
windowsCompatibility: compatible
imagesWithoutWindows: warn
podImagePullSecrets: false
linuxByDefault: false
linuxByDefaultExcludedNamespaces:
  - kube-system
injectorOptOuts: []
`
	if got := string(p.YAML()); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
