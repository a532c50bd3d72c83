package policy

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/wincompat/wincompat/policy/strictyaml"
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
		{"duplicate in a list item", "builds:\n- build: 10.0.20348\n  build: 10.0.17763\n", `line 5: duplicate key "builds[0].build" (first at line 4)`},
		{"null key", "~: x\n", `line 3: unknown key "~"`},
		{"an anchor merged into itself", "builds:\n- &b {<<: *b, build: 10.0.26100}\n", `line 4: anchor "b" contains an alias of itself`},
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
userForRunAsNonRoot: false
memoryLimits:
  fromRequests: false
  default: ""
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
registryMirrors: []
linuxByDefault: false
linuxByDefaultExcludedNamespaces:
  - kube-system
injectorOptOuts: []
`
	if got := string(p.YAML()); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Every field of Policy and Build is a key of the file: a field added without a json tag would be a
// setting no file could change.
func TestEveryPolicyFieldIsAKey(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Policy](), reflect.TypeFor[Build]()} {
		keys := strictyaml.KeysOf(typ)
		if len(keys.Names) != typ.NumField() {
			t.Errorf("%s has %d fields but %d keys: %v", typ, typ.NumField(), len(keys.Names), keys.Names)
		}
	}
	// A taint in a policy is what a toleration matches: corev1.Taint's timeAdded is no key.
	if got := strictyaml.KeysOf(reflect.TypeFor[corev1.Taint]()).Names; !slices.Equal(got, []string{"key", "value", "effect"}) {
		t.Errorf("taint keys %v", got)
	}
}

// default.yaml is the one place the defaults are written: it names every key (a key it left out would
// default to Go's zero value, documented nowhere), and what it says is what Default returns and prints.
func TestDefaultYAMLNamesEveryKey(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal(DefaultPolicyYAML, &root); err != nil {
		t.Fatal(err)
	}
	var named []string
	for i := 0; i < len(root.Content[0].Content); i += 2 {
		named = append(named, root.Content[0].Content[i].Value)
	}
	if want := strictyaml.KeysOf(reflect.TypeFor[policyDocument]()).Names; !slices.Equal(named, want) {
		t.Errorf("default.yaml names\n%v\nthe schema's keys, in order, are\n%v", named, want)
	}
	again, err := Load(Default().YAML())
	if err != nil || !equality.Semantic.DeepEqual(again, Default()) {
		t.Errorf("the printed defaults do not read back as the defaults: %v", err)
	}
}

// Aliases expand under a bound: a list of aliases to a long list would otherwise multiply.
func TestLoadBoundsAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString(header + "excludedNamespaces: &n [" + strings.Repeat("a,", 4000) + "a]\nbuilds:\n")
	for range 4000 {
		b.WriteString("- {build: 10.0.20348, names: *n}\n")
	}
	_, err := Load([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "aliases expand to more than") {
		t.Errorf("%.300v", err)
	}
}

// A refusal quotes what the file wrote, but never more than a few hundred bytes of it per problem.
func TestRefusalClipsLongValues(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	for _, file := range []string{"arch: " + long + "\n", long + ": 1\n", "builds: [{build: &v " + long + "}, {build: *v}, {build: *v}]\n"} {
		_, err := Load([]byte(header + file))
		if err == nil || len(err.Error()) > 4<<10 {
			t.Errorf("a refusal of %d bytes", len(fmt.Sprint(err)))
		}
	}
}

// Validate's paths are keys of the file: a key renamed in its json tag but not in Validate would send
// users to a key that does not exist.
func TestValidatePathsAreKeys(t *testing.T) {
	p := &Policy{
		Mode: "x", NonRootUserName: "a@b", DefaultBuild: "x", Arch: "x", RuntimeClassHandler: "X", RuntimeClassesFor: "x",
		WindowsNodeTaints:  []corev1.Taint{{Key: "a b", Value: "a b", Effect: "x"}},
		ExcludedNamespaces: []string{"X"}, LinuxByDefaultExcludedNamespaces: []string{"X"}, InjectorOptOuts: []string{"x"},
		Builds:               []Build{{Number: "x", Names: []string{"x"}, ImageTags: []string{"X"}, RuntimeClass: "X"}},
		WindowsCompatibility: "x", ImagesWithoutWindows: "x",
	}
	errs := p.Validate()
	if len(errs) < 15 {
		t.Fatalf("only %d errors: %v", len(errs), errs)
	}
	index := regexp.MustCompile(`\[\d+\]`)
	for _, e := range errs {
		typ := reflect.TypeFor[Policy]()
		for _, name := range strings.Split(index.ReplaceAllString(e.Field, ""), ".") {
			k, ok := strictyaml.KeysOf(typ).Lookup(name)
			if !ok {
				t.Errorf("%s: %q is no key of %s", e.Field, name, typ)
				break
			}
			for typ = k.Type; typ.Kind() == reflect.Slice; typ = typ.Elem() {
			}
		}
	}
}

// An unknown key is answered with the keys known where it is, and only there, and the nearest of them:
// a typo in a build does not list the top level's keys, and the top level's do not list a build's.
func TestUnknownKeySaysWhatIsKnownThere(t *testing.T) {
	buildKeys := "build, names, imageTags, runtimeClassName"
	for _, tc := range []struct {
		name, file string
		want       string
		not        []string
	}{
		{"top level", "windowsNodeTaint: []\n",
			`line 3: unknown key "windowsNodeTaint" (did you mean "windowsNodeTaints"?) (known keys: apiVersion, kind, mode, `,
			[]string{buildKeys, "fromRequests", "effect"}},
		{"in a build", "builds:\n- build: 10.0.20348\n  runtimeclassName: x\n",
			`line 5: unknown key "builds[0].runtimeclassName" (did you mean "runtimeClassName"?) (known keys in each of builds: ` + buildKeys + ")",
			[]string{"apiVersion", "windowsNodeTaints"}},
		{"two builds, said once", "builds:\n- {build: 10.0.20348, runtimeClass: x}\n- {build: 10.0.17763, nmes: [a]}\n",
			`line 4: unknown key "builds[0].runtimeClass" (did you mean "runtimeClassName"?); line 5: unknown key "builds[1].nmes" (did you mean "names"?) (known keys in each of builds: ` + buildKeys + ")",
			nil},
		{"in a mapping", "memoryLimits: {fromRequest: true}\n",
			`line 3: unknown key "memoryLimits.fromRequest" (did you mean "fromRequests"?) (known keys in memoryLimits: fromRequests, default)`,
			nil},
		{"two levels, top first", "memoryLimits: {defualt: 1Gi}\ntolerations: []\n",
			`line 3: unknown key "memoryLimits.defualt" (did you mean "default"?); line 4: unknown key "tolerations" (known keys: apiVersion, `,
			[]string{buildKeys}},
		{"nothing near", "tolerations: []\n", `line 3: unknown key "tolerations" (known keys: `, []string{"did you mean"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(header + tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to say %q", err, tc.want)
			}
			for _, s := range tc.not {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error lists %q, known elsewhere: %v", s, err)
				}
			}
		})
	}
	_, err := Load([]byte(header + "memoryLimits: {defualt: 1Gi}\ntolerations: []\n"))
	if err == nil || !strings.HasSuffix(err.Error(), "injectorOptOuts; in memoryLimits: fromRequests, default)") {
		t.Errorf("both levels, the top level first: %v", err)
	}
}
