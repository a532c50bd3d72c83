package manifest

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
)

// IsResourceList reports whether data is a KRM function's input: one config.kubernetes.io/v1
// ResourceList, as kustomize and kpt write to a function's stdin.
func IsResourceList(data []byte) bool {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	return sigsyaml.Unmarshal(data, &tm) == nil && tm.Kind == kio.ResourceListKind && tm.APIVersion == kio.ResourceListAPIVersion
}

// ProcessResourceList is wincompat as a KRM function (kustomize's exec transformers, kpt, Argo CD
// plugins): it reads a ResourceList through kyaml's function framework, mutates each item as Process
// would, leaves every other item as it came, and writes the list back with a result per message
// (resultSeverity). The functionConfig, when given, replaces opts' policy or namespace
// (FunctionOptions). An invalid item fails the function, as it fails `wincompat mutate`, with an error
// result naming it.
func ProcessResourceList(in io.Reader, out io.Writer, opts Options) error {
	rw := &kio.ByteReadWriter{Reader: in, Writer: out, KeepReaderAnnotations: true}
	return framework.Execute(framework.ResourceListProcessorFunc(func(rl *framework.ResourceList) error {
		o, err := FunctionOptions(rl.FunctionConfig, opts)
		if err != nil {
			rl.Results = append(rl.Results, &framework.Result{Message: "wincompat: functionConfig: " + err.Error(), Severity: framework.Error})
			return rl.Results
		}
		failed := false
		for i, item := range rl.Items {
			src, err := item.String()
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			docs, err := Process(fmt.Sprintf("items[%d]", i), []byte(src), &buf, o)
			ref := &yaml.ResourceIdentifier{
				TypeMeta: yaml.TypeMeta{APIVersion: item.GetApiVersion(), Kind: item.GetKind()},
				NameMeta: yaml.NameMeta{Name: item.GetName(), Namespace: item.GetNamespace()},
			}
			if err != nil {
				failed = true
				rl.Results = append(rl.Results, &framework.Result{Message: err.Error(), Severity: framework.Error, ResourceRef: ref})
				continue
			}
			for _, d := range docs {
				for _, m := range d.Messages {
					rl.Results = append(rl.Results, &framework.Result{Message: m.Text, Severity: resultSeverity(m.Severity), ResourceRef: ref})
				}
				if !d.Mutated {
					continue
				}
				mutated, err := yaml.Parse(buf.String())
				if err != nil {
					return fmt.Errorf("items[%d]: re-reading the mutated object: %w", i, err)
				}
				rl.Items[i] = mutated
			}
		}
		if failed {
			return rl.Results
		}
		return nil
	}), rw)
}

// resultSeverity is a message's severity as a KRM function result's: a change made as intended is info,
// what needs action a warning. Neither fails the function; only an error result does.
func resultSeverity(s policy.Severity) framework.Severity {
	if s == policy.SeverityInfo {
		return framework.Info
	}
	return framework.Warning
}

// FunctionOptions applies a KRM function's functionConfig to opts: a wincompat.io/v1alpha1 Policy is
// the policy; a ConfigMap's data may give namespace, namespace-labels and namespace-annotations (k=v,...
// as the mutate flags take them) and policy (a Policy file). nil leaves opts as they are.
func FunctionOptions(fc *yaml.RNode, opts Options) (Options, error) {
	if fc == nil || fc.IsNilOrEmpty() {
		return opts, nil
	}
	switch kind := fc.GetKind(); {
	case kind == "Policy" && strings.HasPrefix(fc.GetApiVersion(), "wincompat.io/"):
		// The function's own object carries metadata (kustomize adds its annotations) that a policy
		// file has no place for.
		body := fc.Copy()
		if err := body.PipeE(yaml.Clear("metadata")); err != nil {
			return opts, err
		}
		s, err := body.String()
		if err != nil {
			return opts, err
		}
		pol, err := policy.Load([]byte(s))
		if err != nil {
			return opts, err
		}
		opts.Policy = pol
		return opts, nil
	case kind == "ConfigMap":
		data := fc.GetDataMap()
		for key := range data {
			switch key {
			case "namespace", "namespace-labels", "namespace-annotations", "policy":
			default:
				return opts, fmt.Errorf("ConfigMap data key %q: use namespace, namespace-labels, namespace-annotations or policy", key)
			}
		}
		ns := opts.Namespace
		if v, ok := data["namespace"]; ok {
			ns.Name = v
		}
		for key, dst := range map[string]*map[string]string{"namespace-labels": &ns.Labels, "namespace-annotations": &ns.Annotations} {
			if v, ok := data[key]; ok {
				m, err := ParseKeyValues(v)
				if err != nil {
					return opts, fmt.Errorf("%s: %w", key, err)
				}
				*dst = m
			}
		}
		opts.Namespace = ns
		if v, ok := data["policy"]; ok {
			pol, err := policy.Load([]byte(v))
			if err != nil {
				return opts, fmt.Errorf("policy: %w", err)
			}
			opts.Policy = pol
		}
		return opts, nil
	default:
		return opts, fmt.Errorf("kind %s %s: use a wincompat.io/v1alpha1 Policy, or a ConfigMap with namespace, namespace-labels, namespace-annotations or policy", fc.GetApiVersion(), kind)
	}
}

// ParseKeyValues reads "k=v,k2=v2", as the mutate flags and a function's ConfigMap give labels.
func ParseKeyValues(s string) (map[string]string, error) {
	m := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		m[k] = v
	}
	return m, nil
}
