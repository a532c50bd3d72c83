package policy

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultPolicyYAML is the default policy, with a comment on every key. It is the one place defaults are
// written down; Default() parses it.
//
//go:embed default.yaml
var DefaultPolicyYAML []byte

const (
	policyAPIVersion = "wincompat.io/v1alpha1"
	policyKind       = "Policy"
)

// Policy is the validated configuration of every decision. Build it with Default or Load.
type Policy struct {
	InferOSFromNodeSelector bool
	NonRootUserName         string
	PodSecurityRestricted   bool
	DefaultBuild            string
	SetRuntimeClassName     bool
	Arch                    string
	RuntimeClassHandler     string
	RuntimeClassesFor       string
	WindowsNodeTaints       []corev1.Taint
	ExcludedNamespaces      []string
	Builds                  []Build
	WindowsCompatibility    string
	ImagesWithoutWindows    string
	PodImagePullSecrets     bool
	// LinuxByDefault pins objects with no OS signal to Linux in every namespace not labelled
	// wincompat.io/default-os but those of LinuxByDefaultExcludedNamespaces.
	LinuxByDefault                   bool
	LinuxByDefaultExcludedNamespaces []string
	// InjectorOptOuts names the Linux-only injectors (Injectors) whose opt-out Windows pods get.
	InjectorOptOuts []string
	// Mode is ModeEnforce or ModeWarn where a namespace's wincompat.io/mode label does not say (ModeFor).
	Mode string
}

// Modes: what wincompat does with what it decides.
const (
	// ModeEnforce changes objects.
	ModeEnforce = "enforce"
	// ModeWarn changes nothing and says what it would have changed, for a staged rollout.
	ModeWarn = "warn"
)

// ModeFor returns the mode of objects in ns: its wincompat.io/mode label, else the policy's. A label
// value that is neither mode leaves the policy's, and note says so: the admission policies' bindings
// read the label the same way, so both engines agree on a misspelt one.
func (p *Policy) ModeFor(ns Namespace) (mode, note string) {
	switch v, ok := ns.Labels[LabelMode]; {
	case !ok:
		return p.Mode, ""
	case v == ModeEnforce || v == ModeWarn:
		return v, ""
	default:
		return p.Mode, fmt.Sprintf("namespace label %s=%q is neither %s nor %s; the policy's mode (%s) applies", LabelMode, v, ModeEnforce, ModeWarn, p.Mode)
	}
}

// Values of ImagesWithoutWindows.
const (
	ImagesWithoutWindowsWarn = "warn"
	ImagesWithoutWindowsDeny = "deny"
)

// Values of RuntimeClassesFor.
const (
	RuntimeClassesForCatalog = "catalog"
	RuntimeClassesForPresent = "present"
)

// Build is one Windows Server build of the catalog.
type Build struct {
	Number       string
	Names        []string
	ImageTags    []string
	RuntimeClass string
}

// file is the YAML shape of a Policy. Pointers tell "not set" from the zero value, so that a user's
// file overrides only the keys it names.
type file struct {
	APIVersion              string      `yaml:"apiVersion"`
	Kind                    string      `yaml:"kind"`
	Mode                    *string     `yaml:"mode"`
	InferOSFromNodeSelector *bool       `yaml:"inferOSFromNodeSelector"`
	NonRootUserName         *string     `yaml:"nonRootUserName"`
	PodSecurityRestricted   *bool       `yaml:"podSecurityRestricted"`
	DefaultBuild            *string     `yaml:"defaultBuild"`
	SetRuntimeClassName     *bool       `yaml:"setRuntimeClassName"`
	Arch                    *string     `yaml:"arch"`
	RuntimeClassHandler     *string     `yaml:"runtimeClassHandler"`
	RuntimeClassesFor       *string     `yaml:"runtimeClassesFor"`
	WindowsNodeTaints       []fileTaint `yaml:"windowsNodeTaints"`
	ExcludedNamespaces      []string    `yaml:"excludedNamespaces"`
	Builds                  []fileBuild `yaml:"builds"`
	WindowsCompatibility    *string     `yaml:"windowsCompatibility"`
	ImagesWithoutWindows    *string     `yaml:"imagesWithoutWindows"`
	PodImagePullSecrets     *bool       `yaml:"podImagePullSecrets"`
	LinuxByDefault          *bool       `yaml:"linuxByDefault"`
	LinuxByDefaultExcluded  []string    `yaml:"linuxByDefaultExcludedNamespaces"`
	InjectorOptOuts         []string    `yaml:"injectorOptOuts"`
}

type fileTaint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
}

type fileBuild struct {
	Build            string   `yaml:"build"`
	Names            []string `yaml:"names"`
	ImageTags        []string `yaml:"imageTags"`
	RuntimeClassName string   `yaml:"runtimeClassName"`
}

// Default returns the built-in policy.
func Default() *Policy {
	p, err := Load(nil)
	if err != nil {
		// default.yaml is compiled in and covered by tests.
		panic("wincompat: built-in default policy is invalid: " + err.Error())
	}
	return p
}

// Load parses a policy file over the defaults. Unknown keys, wrong types and invalid values are errors
// that name the key (and, for YAML errors, the line). nil or empty data gives the defaults.
func Load(data []byte) (*Policy, error) {
	if len(data) > MaxPolicyBytes {
		return nil, fmt.Errorf("the policy is %d KiB; at most %d KiB is read (one with every key and a catalog of dozens of builds takes a few KiB)", len(data)>>10, MaxPolicyBytes>>10)
	}
	var f file
	if err := decodeStrict(DefaultPolicyYAML, &f); err != nil {
		return nil, fmt.Errorf("built-in defaults: %w", err)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		var user file
		if err := decodeStrict(data, &user); err != nil {
			return nil, err
		}
		if user.APIVersion != policyAPIVersion || user.Kind != policyKind {
			return nil, fmt.Errorf("apiVersion/kind: got %q/%q, want %s/%s", user.APIVersion, user.Kind, policyAPIVersion, policyKind)
		}
		f.overlay(&user)
	}
	return f.validate()
}

// MaxPolicyBytes bounds a policy file: whoever may write the policy ConfigMap, or reach the policy
// check, chooses its size, and parsing and reporting cost grow with it.
const MaxPolicyBytes = 256 << 10

// maxReportedErrors is how many YAML errors a refusal names; the rest are counted. A refusal is read by
// a person, and a file of a thousand unknown keys would otherwise be answered with a megabyte.
const maxReportedErrors = 10

var yamlFieldError = regexp.MustCompile(`line (\d+): field (\S+) not found in type \S+`)

// maxMappingKeys bounds the keys of one mapping in a policy file (the file itself has a few dozen):
// yaml.v3 compares every key of a mapping with every other to find duplicates, and reports each
// duplicate pair, so a mapping of ten thousand keys costs seconds and gigabytes before any check of ours.
const maxMappingKeys = 256

func decodeStrict(data []byte, into *file) error {
	// Parsing into nodes is linear and compares no keys: it bounds the mappings before the decoder does.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return err
	}
	if line, n := largestMapping(&root); n > maxMappingKeys {
		return fmt.Errorf("line %d: a mapping of %d keys; a policy's mappings have at most %d (known keys: %s)", line, n, maxMappingKeys, knownKeys())
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(into); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, 0, min(len(te.Errors), maxReportedErrors+1))
			unknown := false
			for _, m := range te.Errors[:min(len(te.Errors), maxReportedErrors)] {
				if sm := yamlTypeError.FindStringSubmatch(m); sm != nil {
					m = typeErrorMessage(&root, sm)
				}
				if sm := yamlFieldError.FindStringSubmatch(m); sm != nil {
					m, unknown = fmt.Sprintf("line %s: unknown key %q", sm[1], sm[2]), true
				}
				msgs = append(msgs, m)
			}
			if more := len(te.Errors) - maxReportedErrors; more > 0 {
				msgs = append(msgs, fmt.Sprintf("and %d more", more))
			}
			out := strings.Join(msgs, "; ")
			if unknown {
				out += " (known keys: " + knownKeys() + ")"
			}
			return errors.New(out)
		}
		return err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("the policy file must hold exactly one YAML document")
	}
	return nil
}

var yamlTypeError = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")

// wantedShapes says in the file's words what each Go type of the file accepts.
var wantedShapes = map[string]string{
	"bool": "true or false", "*bool": "true or false", "string": "a string", "*string": "a string",
	"[]string":           "a list of strings",
	"[]policy.fileTaint": "a list of taints, each with key, value and effect",
	"[]policy.fileBuild": "a list of builds, each with build, names, imageTags and runtimeClassName",
	"policy.fileTaint":   "a taint with key, value and effect",
	"policy.fileBuild":   "a build with build, names, imageTags and runtimeClassName",
}

// typeErrorMessage turns the YAML decoder's "cannot unmarshal !!str `x` into []policy.fileBuild" into
// a message that names the key at that line and what it accepts, without Go type names.
func typeErrorMessage(root *yaml.Node, sm []string) string {
	line, _ := strconv.Atoi(sm[1])
	key := "a value"
	if k := keyAtLine(root, "", line, "!!"+sm[2]); k != "" {
		key = k
	}
	want, ok := wantedShapes[sm[4]]
	if !ok {
		want = "another type"
	}
	got := map[string]string{"seq": "a list", "map": "a mapping"}[sm[2]]
	if got == "" {
		got = fmt.Sprintf("%s %q", sm[2], sm[3])
	}
	return fmt.Sprintf("line %d: %s: got %s, want %s", line, key, got, want)
}

// largestMapping returns the line and number of keys of the mapping with the most keys under n. Aliases
// are not followed: the decoder expands them under its own bounds.
func largestMapping(n *yaml.Node) (line, keys int) {
	if n.Kind == yaml.MappingNode {
		line, keys = n.Line, len(n.Content)/2
	}
	for _, c := range n.Content {
		if l, k := largestMapping(c); k > keys {
			line, keys = l, k
		}
	}
	return line, keys
}

// keyAtLine finds the path of the last key whose value starts at line with the given YAML tag.
func keyAtLine(n *yaml.Node, path string, line int, tag string) string {
	found := ""
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if k := keyAtLine(c, path, line, tag); k != "" {
				found = k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if v.Line == line && v.Tag == tag {
				found = p
			}
			if sub := keyAtLine(v, p, line, tag); sub != "" {
				found = sub
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if c.Line == line && c.Tag == tag && c.Kind != yaml.MappingNode {
				found = p
			}
			if sub := keyAtLine(c, p, line, tag); sub != "" {
				found = sub
			}
		}
	}
	return found
}

// knownKeys lists every key a policy file may use, for error messages.
func knownKeys() string {
	var keys []string
	for _, t := range []reflect.Type{reflect.TypeFor[file](), reflect.TypeFor[fileTaint](), reflect.TypeFor[fileBuild]()} {
		for i := range t.NumField() {
			keys = append(keys, t.Field(i).Tag.Get("yaml"))
		}
	}
	return strings.Join(keys, ", ")
}

func (f *file) overlay(u *file) {
	setIf(&f.InferOSFromNodeSelector, u.InferOSFromNodeSelector)
	setIf(&f.NonRootUserName, u.NonRootUserName)
	setIf(&f.PodSecurityRestricted, u.PodSecurityRestricted)
	setIf(&f.DefaultBuild, u.DefaultBuild)
	setIf(&f.SetRuntimeClassName, u.SetRuntimeClassName)
	setIf(&f.Arch, u.Arch)
	setIf(&f.RuntimeClassHandler, u.RuntimeClassHandler)
	setIf(&f.RuntimeClassesFor, u.RuntimeClassesFor)
	setIf(&f.WindowsCompatibility, u.WindowsCompatibility)
	setIf(&f.ImagesWithoutWindows, u.ImagesWithoutWindows)
	setIf(&f.PodImagePullSecrets, u.PodImagePullSecrets)
	setIf(&f.LinuxByDefault, u.LinuxByDefault)
	setIf(&f.Mode, u.Mode)
	if u.LinuxByDefaultExcluded != nil {
		f.LinuxByDefaultExcluded = u.LinuxByDefaultExcluded
	}
	if u.InjectorOptOuts != nil {
		f.InjectorOptOuts = u.InjectorOptOuts
	}
	if u.WindowsNodeTaints != nil {
		f.WindowsNodeTaints = u.WindowsNodeTaints
	}
	if u.ExcludedNamespaces != nil {
		f.ExcludedNamespaces = u.ExcludedNamespaces
	}
	if u.Builds != nil {
		f.Builds = u.Builds
	}
}

func setIf[T any](dst **T, src *T) {
	if src != nil {
		*dst = src
	}
}

var validEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

func (f *file) validate() (*Policy, error) {
	p := &Policy{
		InferOSFromNodeSelector:          *f.InferOSFromNodeSelector,
		NonRootUserName:                  *f.NonRootUserName,
		PodSecurityRestricted:            *f.PodSecurityRestricted,
		SetRuntimeClassName:              *f.SetRuntimeClassName,
		Arch:                             *f.Arch,
		RuntimeClassHandler:              *f.RuntimeClassHandler,
		RuntimeClassesFor:                *f.RuntimeClassesFor,
		ExcludedNamespaces:               f.ExcludedNamespaces,
		WindowsCompatibility:             *f.WindowsCompatibility,
		ImagesWithoutWindows:             *f.ImagesWithoutWindows,
		PodImagePullSecrets:              *f.PodImagePullSecrets,
		LinuxByDefault:                   *f.LinuxByDefault,
		LinuxByDefaultExcludedNamespaces: f.LinuxByDefaultExcluded,
		InjectorOptOuts:                  f.InjectorOptOuts,
		Mode:                             *f.Mode,
	}
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if p.Arch != "" && p.Arch != "amd64" && p.Arch != "arm64" {
		fail("arch", "%q is not supported: use amd64, arm64 or \"\" (do not pin)", p.Arch)
	}
	if msgs := validation.IsDNS1123Label(p.RuntimeClassHandler); len(msgs) > 0 {
		fail("runtimeClassHandler", "%q is not a valid RuntimeClass handler (a DNS label such as runhcs-wcow-process): %s", p.RuntimeClassHandler, strings.Join(msgs, "; "))
	}
	if p.RuntimeClassesFor != RuntimeClassesForCatalog && p.RuntimeClassesFor != RuntimeClassesForPresent {
		fail("runtimeClassesFor", "%q: use %s or %s", p.RuntimeClassesFor, RuntimeClassesForCatalog, RuntimeClassesForPresent)
	}
	if p.WindowsCompatibility != CompatibilityCompatible && p.WindowsCompatibility != CompatibilityExact {
		fail("windowsCompatibility", "%q: use %s (containerd 1.7.6 and later: a 2025 node runs 2022 images) or %s (the image's build must equal the node's)", p.WindowsCompatibility, CompatibilityCompatible, CompatibilityExact)
	}
	if p.ImagesWithoutWindows != ImagesWithoutWindowsWarn && p.ImagesWithoutWindows != ImagesWithoutWindowsDeny {
		fail("imagesWithoutWindows", "%q: use %s or %s", p.ImagesWithoutWindows, ImagesWithoutWindowsWarn, ImagesWithoutWindowsDeny)
	}
	if p.Mode != ModeEnforce && p.Mode != ModeWarn {
		fail("mode", "%q: use %s (change objects) or %s (change nothing, warn what would change)", p.Mode, ModeEnforce, ModeWarn)
	}
	if p.NonRootUserName != "" && !validUserName(p.NonRootUserName) {
		fail("nonRootUserName", "%q is not a Windows user name: use USER or DOMAIN\\USER, USER at most 104 characters and none of \"/\\:;|=,+*?<>@[]", p.NonRootUserName)
	}
	for i, t := range f.WindowsNodeTaints {
		key := fmt.Sprintf("windowsNodeTaints[%d]", i)
		if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
			fail(key+".key", "%q is not a valid taint key: %s", t.Key, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			fail(key+".value", "%q is not a valid taint value: %s", t.Value, strings.Join(msgs, "; "))
		}
		if !slices.Contains(validEffects, corev1.TaintEffect(t.Effect)) {
			fail(key+".effect", "%q is not one of NoSchedule, PreferNoSchedule, NoExecute", t.Effect)
		}
		p.WindowsNodeTaints = append(p.WindowsNodeTaints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	for _, l := range []struct {
		key   string
		names []string
	}{{"excludedNamespaces", p.ExcludedNamespaces}, {"linuxByDefaultExcludedNamespaces", p.LinuxByDefaultExcludedNamespaces}} {
		for _, ns := range l.names {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				fail(l.key, "%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
			}
		}
	}
	for i, name := range p.InjectorOptOuts {
		if _, ok := injectorNamed(name); !ok {
			var known []string
			for _, in := range linuxOnlyInjectors {
				known = append(known, in.Name)
			}
			fail(fmt.Sprintf("injectorOptOuts[%d]", i), "%q is not an injector wincompat knows: use some of %s, or [] for none", name, strings.Join(known, ", "))
		}
	}
	if len(f.Builds) == 0 {
		fail("builds", "the catalog is empty: list at least one build (see the defaults)")
	}
	seen := map[string]string{}
	for i, b := range f.Builds {
		key := fmt.Sprintf("builds[%d]", i)
		if !buildNumber.MatchString(b.Build) {
			fail(key+".build", "%q is not a Windows build number like 10.0.20348", b.Build)
		}
		if b.RuntimeClassName != "" {
			if msgs := validation.IsDNS1123Subdomain(b.RuntimeClassName); len(msgs) > 0 {
				fail(key+".runtimeClassName", "%q is not a valid RuntimeClass name: %s", b.RuntimeClassName, strings.Join(msgs, "; "))
			}
		}
		for _, name := range append(append([]string{b.Build}, b.Names...), b.ImageTags...) {
			lower := strings.ToLower(name)
			if other, dup := seen[lower]; dup && other != b.Build {
				fail(key, "name %q also names build %s: every name must point to one build", name, other)
			}
			seen[lower] = b.Build
		}
		p.Builds = append(p.Builds, Build{Number: b.Build, Names: b.Names, ImageTags: b.ImageTags, RuntimeClass: b.RuntimeClassName})
	}
	if f.DefaultBuild != nil && *f.DefaultBuild != "" {
		if b, ok := p.lookupBuild(*f.DefaultBuild); ok {
			p.DefaultBuild = b.Number
		} else {
			fail("defaultBuild", "%q is not in the catalog: use one of %s", *f.DefaultBuild, p.buildNames())
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// YAML renders the policy as a policy file, for --print-policy.
func (p *Policy) YAML() []byte {
	f := file{
		APIVersion:              policyAPIVersion,
		Kind:                    policyKind,
		Mode:                    &p.Mode,
		InferOSFromNodeSelector: &p.InferOSFromNodeSelector,
		NonRootUserName:         &p.NonRootUserName,
		PodSecurityRestricted:   &p.PodSecurityRestricted,
		DefaultBuild:            &p.DefaultBuild,
		SetRuntimeClassName:     &p.SetRuntimeClassName,
		Arch:                    &p.Arch,
		RuntimeClassHandler:     &p.RuntimeClassHandler,
		RuntimeClassesFor:       &p.RuntimeClassesFor,
		ExcludedNamespaces:      p.ExcludedNamespaces,
		WindowsCompatibility:    &p.WindowsCompatibility,
		ImagesWithoutWindows:    &p.ImagesWithoutWindows,
		PodImagePullSecrets:     &p.PodImagePullSecrets,
		LinuxByDefault:          &p.LinuxByDefault,
		LinuxByDefaultExcluded:  p.LinuxByDefaultExcludedNamespaces,
		InjectorOptOuts:         p.InjectorOptOuts,
	}
	for _, t := range p.WindowsNodeTaints {
		f.WindowsNodeTaints = append(f.WindowsNodeTaints, fileTaint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	for _, b := range p.Builds {
		f.Builds = append(f.Builds, fileBuild{Build: b.Number, Names: b.Names, ImageTags: b.ImageTags, RuntimeClassName: b.RuntimeClass})
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(f) // a plain struct of strings, bools and lists always encodes
	return buf.Bytes()
}

// validUserName checks the user part the way the API server checks windowsOptions.runAsUserName, so that
// a policy cannot make wincompat write a value the API server then rejects. The domain part is left to
// the API server.
func validUserName(name string) bool {
	parts := strings.Split(name, `\`)
	if len(parts) > 2 {
		return false
	}
	user := parts[len(parts)-1]
	return len(user) > 0 && len(user) <= 104 && !strings.ContainsAny(user, "\"/\\:;|=,+*?<>@[]") &&
		strings.Trim(user, ". ") != "" && !strings.ContainsFunc(name, unicode.IsControl)
}
