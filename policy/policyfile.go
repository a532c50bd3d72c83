package policy

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wincompat/wincompat/policy/strictyaml"
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

// policyDocument is a policy file: a header, then the keys of Policy at the top level. The json tags of
// Policy and of the types under it are the file's keys, its error paths and its printed form; nothing
// else lists them. strictyaml reads and prints it by those tags.
type policyDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Policy     `json:",inline"`
}

// Policy is the validated configuration of every decision, and the schema of a policy file: its json
// tags are the file's keys, in the order default.yaml and `wincompat policy` list them. Build it with
// Default or Load.
type Policy struct {
	// Mode is ModeEnforce or ModeWarn where a namespace's wincompat.io/mode label does not say (ModeFor).
	Mode                    string `json:"mode"`
	InferOSFromNodeSelector bool   `json:"inferOSFromNodeSelector"`
	NonRootUserName         string `json:"nonRootUserName"`
	PodSecurityRestricted   bool   `json:"podSecurityRestricted"`
	// UserForRunAsNonRoot names NonRootUserName where runAsNonRoot: true has no Windows user (rewrite_narrow.go).
	UserForRunAsNonRoot bool `json:"userForRunAsNonRoot"`
	// MemoryLimits gives containers without a memory limit one (rewrite_narrow.go).
	MemoryLimits MemoryLimits `json:"memoryLimits"`
	// DefaultBuild is a build number once loaded; the file may name the build by any of its names.
	DefaultBuild         string         `json:"defaultBuild"`
	SetRuntimeClassName  bool           `json:"setRuntimeClassName"`
	Arch                 string         `json:"arch"`
	RuntimeClassHandler  string         `json:"runtimeClassHandler"`
	RuntimeClassesFor    string         `json:"runtimeClassesFor"`
	WindowsNodeTaints    []corev1.Taint `json:"windowsNodeTaints"`
	ExcludedNamespaces   []string       `json:"excludedNamespaces"`
	Builds               []Build        `json:"builds"`
	WindowsCompatibility string         `json:"windowsCompatibility"`
	ImagesWithoutWindows string         `json:"imagesWithoutWindows"`
	PodImagePullSecrets  bool           `json:"podImagePullSecrets"`
	// RegistryMirrors are where the image resolver reads registries' images, as containerd's hosts.toml
	// (policyfile_mirrors.go).
	RegistryMirrors []RegistryMirror `json:"registryMirrors"`
	// LinuxByDefault pins objects with no OS signal to Linux in every namespace not labelled
	// wincompat.io/default-os but those of LinuxByDefaultExcludedNamespaces.
	LinuxByDefault                   bool     `json:"linuxByDefault"`
	LinuxByDefaultExcludedNamespaces []string `json:"linuxByDefaultExcludedNamespaces"`
	// InjectorOptOuts names the Linux-only injectors (Injectors) whose opt-out Windows pods get.
	InjectorOptOuts []string `json:"injectorOptOuts"`
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

// MemoryLimits says which containers without a memory limit get one. Windows has no OOM killer and no
// eviction, so only a limit keeps a container from taking the node's memory.
type MemoryLimits struct {
	// FromRequests sets the limit to the container's memory request, where it has one.
	FromRequests bool `json:"fromRequests"`
	// Default is a quantity (512Mi) set as the limit of a container with neither a request nor a limit;
	// "" sets none.
	Default string `json:"default"`
}

// Build is one Windows Server build of the catalog.
type Build struct {
	Number       string   `json:"build"`
	Names        []string `json:"names"`
	ImageTags    []string `json:"imageTags"`
	RuntimeClass string   `json:"runtimeClassName"`
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

// Load reads a policy file over the defaults: a key the file names replaces the default (a list as a
// whole), a key it leaves out or sets to null keeps it. Unknown and duplicate keys and values of the
// wrong shape are errors naming the line and the key's path; invalid values are errors naming the path
// (Validate). nil or empty data gives the defaults.
func Load(data []byte) (*Policy, error) {
	if len(data) > MaxPolicyBytes {
		return nil, fmt.Errorf("the policy is %d KiB; at most %d KiB is read (one with every key and a catalog of dozens of builds takes a few KiB)", len(data)>>10, MaxPolicyBytes>>10)
	}
	var doc policyDocument
	if err := strictyaml.Decode(DefaultPolicyYAML, &doc); err != nil {
		return nil, fmt.Errorf("built-in defaults: %w", err)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		doc.APIVersion, doc.Kind = "", ""
		if err := strictyaml.Decode(data, &doc); err != nil {
			return nil, err
		}
		if doc.APIVersion != policyAPIVersion || doc.Kind != policyKind {
			return nil, fmt.Errorf("apiVersion/kind: got %q/%q, want %s/%s", doc.APIVersion, doc.Kind, policyAPIVersion, policyKind)
		}
	}
	p := &doc.Policy
	if errs := p.Validate(); len(errs) > 0 {
		return nil, refusal(errs)
	}
	if p.DefaultBuild != "" {
		b, _ := p.lookupBuild(p.DefaultBuild) // Validate found it
		p.DefaultBuild = b.Number
	}
	return p, nil
}

// MaxPolicyBytes bounds a policy file: whoever may write the policy ConfigMap, or reach the policy
// check, chooses its size, and parsing and reporting cost grow with it.
const MaxPolicyBytes = 256 << 10

// refusal names the first strictyaml.MaxProblems problems and counts the rest.
func refusal(errs field.ErrorList) error {
	msgs := make([]string, 0, min(len(errs), strictyaml.MaxProblems)+1)
	for _, e := range errs[:min(len(errs), strictyaml.MaxProblems)] {
		msgs = append(msgs, strictyaml.ClipProblem(e.Error()))
	}
	if more := len(errs) - strictyaml.MaxProblems; more > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more", more))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// YAML renders the policy as a policy file with every key, for `wincompat policy --policy FILE`.
func (p *Policy) YAML() []byte {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(strictyaml.Node(policyDocument{APIVersion: policyAPIVersion, Kind: policyKind, Policy: *p})) // strings, booleans and lists always encode
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
