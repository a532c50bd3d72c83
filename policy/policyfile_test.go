package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultPolicyIsValid(t *testing.T) {
	p := Default()
	if !p.InferOSFromNodeSelector || p.NonRootUserName != "ContainerUser" || !p.PodSecurityRestricted || !p.SetRuntimeClassName {
		t.Errorf("unexpected defaults: %+v", p)
	}
	if len(p.Builds) != 3 || len(p.WindowsNodeTaints) != 1 || p.WindowsNodeTaints[0].ToString() != "os=windows:NoSchedule" {
		t.Errorf("unexpected default catalog or taints: %+v", p)
	}
}

func TestPolicyYAMLRoundTrips(t *testing.T) {
	p, err := Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: arm64\ndefaultBuild: ltsc2022\n"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(p.YAML())
	if err != nil {
		t.Fatalf("rendered policy does not load: %v\n%s", err, p.YAML())
	}
	if !reflect.DeepEqual(p, again) {
		t.Errorf("round trip changed the policy:\n%+v\n%+v", p, again)
	}
	if p.DefaultBuild != "10.0.20348" {
		t.Errorf("defaultBuild ltsc2022 resolved to %q", p.DefaultBuild)
	}
}

func TestLoadOverlaysOnlyGivenKeys(t *testing.T) {
	p, err := Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\npodSecurityRestricted: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.PodSecurityRestricted || !p.InferOSFromNodeSelector || len(p.Builds) != 3 {
		t.Errorf("overlay wrong: %+v", p)
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"unknown key with line", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\ntolerations: []\n", `line 3: unknown key "tolerations"`},
		{"unknown nested key", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds:\n- build: 10.0.20348\n  runtimeClass: x\n", `line 5: unknown key "builds[0].runtimeClass"`},
		{"wrong type", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nsetRuntimeClassName: maybe\n", `line 3: setRuntimeClassName: got str "maybe", want true or false`},
		{"string for a list", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds: none\n", `line 3: builds: got str "none", want a list of builds, each with build, names, imageTags and runtimeClassName`},
		{"list for a string", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: [amd64]\n", `line 3: arch: got a list, want a string`},
		{"wrong type nested", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds:\n- build: 10.0.17763\n  names: lts\n", `line 5: builds[0].names: got str "lts", want a list of strings`},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\n", "want wincompat.io/v1alpha1/Policy"},
		{"two documents", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\n---\na: 1\n", "exactly one YAML document"},
		{"bad effect", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints:\n- {key: os, value: windows, effect: NoScheduel}\n", `windowsNodeTaints[0].effect: Unsupported value: "NoScheduel": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`},
		{"bad taint key", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints:\n- {key: 'a b', value: windows, effect: NoSchedule}\n", "windowsNodeTaints[0].key"},
		{"bad arch", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: x86\n", `arch: Invalid value: "x86": use amd64, arm64`},
		{"unknown default build", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\ndefaultBuild: ltsc2016\n", `defaultBuild: Invalid value: "ltsc2016": not in the catalog: use one of 10.0.17763, ltsc2019`},
		{"bad build number", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds:\n- build: \"2022\"\n", `builds[0].build: Invalid value: "2022": not a Windows build number`},
		{"empty catalog", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds: []\n", "builds: Required value: the catalog is empty"},
		{"ambiguous name", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds:\n- {build: 10.0.17763, names: [lts]}\n- {build: 10.0.20348, names: [LTS]}\n", `builds[1].names[0]: Invalid value: "LTS": also names build 10.0.17763`},
		{"bad runtime class", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds:\n- {build: 10.0.17763, runtimeClassName: Windows_2019}\n", "builds[0].runtimeClassName"},
		{"bad user", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nnonRootUserName: 'a@b'\n", `nonRootUserName: Invalid value: "a@b": not a Windows user name`},
		{"bad namespace", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nexcludedNamespaces: [Kube_System]\n", `excludedNamespaces[0]: Invalid value: "Kube_System": not a namespace name`},
		{"bad mode", "apiVersion: wincompat.io/v1alpha1\nkind: Policy\nmode: audit\n", `mode: Invalid value: "audit": use enforce (change objects) or warn`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.file))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestUnknownKeyErrorListsKnownKeys(t *testing.T) {
	_, err := Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\ndefualtBuild: x\n"))
	if err == nil || !strings.Contains(err.Error(), "defaultBuild") {
		t.Errorf("error should suggest the known keys: %v", err)
	}
}

func TestValidUserName(t *testing.T) {
	for name, want := range map[string]bool{
		"ContainerUser": true, `NT AUTHORITY\NETWORK SERVICE`: true, `CORP\svc-web`: true,
		"": false, `a\b\c`: false, "a@b": false, "...": false, "a\tb": false, strings.Repeat("u", 105): false,
	} {
		if got := validUserName(name); got != want {
			t.Errorf("validUserName(%q) = %v, want %v", name, got, want)
		}
	}
}

// A namespace's label chooses its mode; a value that is no mode leaves the policy's, and says so.
func TestModeFor(t *testing.T) {
	warnByDefault, err := Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nmode: warn\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pol     *Policy
		label   string
		want    string
		hasNote bool
	}{
		{Default(), "", ModeEnforce, false},
		{Default(), ModeWarn, ModeWarn, false},
		{Default(), ModeEnforce, ModeEnforce, false},
		{Default(), "Warn", ModeEnforce, true},
		{warnByDefault, "", ModeWarn, false},
		{warnByDefault, ModeEnforce, ModeEnforce, false},
		{warnByDefault, "enforced", ModeWarn, true},
	} {
		ns := Namespace{Name: "demo", Labels: map[string]string{LabelEnabled: "true"}}
		if tc.label != "" {
			ns.Labels[LabelMode] = tc.label
		}
		got, note := tc.pol.ModeFor(ns)
		if got != tc.want || (note != "") != tc.hasNote {
			t.Errorf("policy mode %s, label %q: got %s (note %q), want %s (note: %v)", tc.pol.Mode, tc.label, got, note, tc.want, tc.hasNote)
		}
	}
}

// Shapes of a hostile policy: a valid header followed by lines of unknown keys, of one key again and
// again (yaml.v3 reported each pair), or of one key again and again in a second document (which used to
// be decoded, pairs and all, only to say that a policy is one document).
const (
	unknownKeys = iota
	repeatedKey
	secondDocument
)

var hostileShapes = []string{"unknownKeys", "repeatedKey", "secondDocument"}

// hostilePolicy is a policy of the given shape, size bytes long.
func hostilePolicy(size, shape int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: wincompat.io/v1alpha1\nkind: Policy\n")
	if shape == secondDocument {
		b.WriteString("---\n")
	}
	for i := 0; ; i++ {
		line := fmt.Sprintf("unknownKey%d: true\n", i)
		if shape != unknownKeys {
			line = fmt.Sprintf("builds: [x%d]\n", i)
		}
		if b.Len()+len(line) > size {
			return []byte(b.String() + strings.Repeat("#", size-b.Len()))
		}
		b.WriteString(line)
	}
}

// Whoever may write the policy ConfigMap (or reach the policy check) chooses its size: the refusal is
// bounded and names a few errors, and a policy past MaxPolicyBytes is refused before it is parsed.
func TestLoadBoundsHostilePolicies(t *testing.T) {
	for shape, want := range []string{"a mapping of", "a mapping of", "exactly one YAML document"} {
		_, err := Load(hostilePolicy(MaxPolicyBytes, shape))
		if err == nil || len(err.Error()) > 4<<10 || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: a refusal of %d bytes: %.300v", hostileShapes[shape], len(fmt.Sprint(err)), err)
		}
	}
	if _, err := Load(hostilePolicy(MaxPolicyBytes+1, unknownKeys)); err == nil || !strings.Contains(err.Error(), "at most 256 KiB") {
		t.Errorf("past the bound: %v", err)
	}
	// Within the key bound, many errors are counted, not listed.
	if _, err := Load(hostilePolicy(4<<10, unknownKeys)); err == nil || len(err.Error()) > 4<<10 || !strings.Contains(err.Error(), "more") {
		t.Errorf("a few hundred unknown keys: %.300v", err)
	}
}

// BenchmarkLoadHostile shows the cost of refusing a hostile policy growing linearly with its size.
func BenchmarkLoadHostile(b *testing.B) {
	for shape, name := range hostileShapes {
		for _, size := range []int{16 << 10, 64 << 10, MaxPolicyBytes} {
			data := hostilePolicy(size, shape)
			b.Run(fmt.Sprintf("%s/size=%dKiB", name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					_, _ = Load(data)
				}
			})
		}
	}
}
