package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestHelmChartValues: issue 27. The chart's values.schema.json refuses a mistyped value at `helm
// template` and `helm lint`, in words that name what is allowed; every value values.yaml documents, every
// allowed value of a closed set and the non-default values of TestHelmChart render; values.yaml and the
// schema name the same keys; and the chart's own render-time checks still stand behind the schema.
// Rendering only.
func TestHelmChartValues(t *testing.T) {
	t.Run("mistyped values fail", func(t *testing.T) {
		for _, tc := range []struct {
			name, values string
			want         []string // in the error of both helm template and helm lint
		}{
			// The three of the issue: each rendered without an error before.
			{"tls.mode", "tls: {mode: selfmanaged}\n", []string{`at '/tls/mode': value must be one of 'cert-manager', 'self-managed'`}},
			{"webhook.failurePolicy", "webhook: {failurePolicy: Fial}\n", []string{`at '/webhook/failurePolicy': value must be one of '', 'Fail', 'Ignore'`}},
			{"antiAffinity", "antiAffinity: requird\n", []string{`at '/antiAffinity': value must be one of 'preferred', 'required'`}},
			// Unknown keys: the closest known one, which Helm's own message about the schema never names.
			{"a key at the top", "replicaCnt: 3\n", []string{`unknown key replicaCnt: did you mean replicaCount? (values.yaml documents every key)`}},
			{"a nested key", "imageResolver: {timout: 2s}\n", []string{`unknown key imageResolver.timout: did you mean imageResolver.timeout?`}},
			{"a key in another case", "ReplicaCount: 3\n", []string{`unknown key ReplicaCount: did you mean replicaCount?`}},
			{"a key close to none", "colour: blue\n", []string{`unknown key colour: the keys at the top are antiAffinity, criticalPodsQuota, enabled, engine, global, health, image, `}},
			{"a nested key close to none", "tls: {cipherSuites: [a]}\n", []string{`unknown key tls.cipherSuites: the keys of tls are certManager, minVersion, mode, secretName`}},
			{"a hostile key", "? \"line\\nbreak" + strings.Repeat("x", 5000) + "\"\n: 1\n", []string{`unknown key "line\nbreak` + strings.Repeat("x", 54) + `": the keys at the top are`}},
			// 0 replicas where a webhook fails closed.
			{"no replica with the webhook engine", "replicaCount: 0\n", []string{`replicaCount 0 leaves no replica to answer the Windows webhooks, whose failurePolicy is Fail (the webhook engine's default)`, `set webhook.failurePolicy=Ignore`, `engine=hybrid`}},
			{"no replica in warn mode", "replicaCount: 0\npolicy: {mode: warn}\n", []string{`replicaCount 0 leaves no replica`, `in warn mode too`}},
			{"no replica with hybrid that fails closed", "replicaCount: 0\nengine: hybrid\nwebhook: {failurePolicy: Fail}\n", []string{`whose failurePolicy is Fail (webhook.failurePolicy)`}},
			{"no replica with Linux by default that fails closed", "replicaCount: 0\nwebhook: {failurePolicy: Ignore}\nlinuxByDefault: {failurePolicy: Fail}\n", []string{`replicaCount 0 leaves no replica to answer the Linux-by-default webhooks`, `linuxByDefault.failurePolicy=Ignore`}},
			// A build the catalog lacks, as `wincompat policy` refuses it.
			{"policy.defaultBuild", "policy: {defaultBuild: ltsc2021}\n", []string{`at '/policy/defaultBuild'`, `value must be one of '', '10.0.17763', 'ltsc2019', '2019', '1809', '10.0.20348', 'ltsc2022'`}},
			{"policy.defaultBuild of its own catalog", "policy: {defaultBuild: ltsc2022, builds: [{build: 10.0.26100, names: [prod]}]}\n", []string{`policy.defaultBuild "ltsc2022" is not in the catalog of policy.builds: use one of 10.0.26100, prod`}},
			{"a wrong type", "replicaCount: two\n", []string{`at '/replicaCount': got string, want integer`}},
			{"a list for a mapping", "webhook: [port]\n", []string{`at '/webhook': got array, want object`}},
			{"engine", "engine: turbo\n", []string{`at '/engine': value must be one of 'auto', 'webhook', 'hybrid'`}},
			{"linuxByDefault.failurePolicy", "linuxByDefault: {failurePolicy: fail}\n", []string{`at '/linuxByDefault/failurePolicy': value must be one of 'Ignore', 'Fail'`}},
			{"logLevel", "logLevel: verbose\n", []string{`at '/logLevel': value must be one of 'debug', 'info', 'error', 'panic'`}},
			{"tls.minVersion", "tls: {minVersion: \"1.1\"}\n", []string{`at '/tls/minVersion': value must be one of '1.2', '1.3'`}},
			{"a duration", "imageResolver: {tagTTL: 5 minutes}\n", []string{`at '/imageResolver/tagTTL': '5 minutes' does not match pattern`}},
			{"a duration as a number", "webhook: {readTimeout: 10}\n", []string{`at '/webhook/readTimeout': got number, want string`}},
			{"a quantity", "imageResolver: {bytesInFlight: 32MB}\n", []string{`at '/imageResolver/bytesInFlight': '32MB' does not match pattern`}},
			{"a port", "webhook: {port: 70000}\n", []string{`at '/webhook/port': maximum: got 70,000, want 65,535`}},
			{"no lookups at all", "imageResolver: {maxLookups: 0}\n", []string{`at '/imageResolver/maxLookups': minimum: got 0, want 1`}},
			// The policy's part of the schema, generated from policy.Policy.
			{"policy.mode", "policy: {mode: warm}\n", []string{`at '/policy/mode': value must be one of 'enforce', 'warn'`}},
			{"a policy key", "policy: {imagesWithoutWindow: deny}\n", []string{`unknown key policy.imagesWithoutWindow: did you mean policy.imagesWithoutWindows?`}},
			{"a taint's effect", "policy: {windowsNodeTaints: [{key: os, value: windows, effect: NoSchedul}]}\n", []string{`at '/policy/windowsNodeTaints/0/effect': value must be one of 'NoSchedule', 'PreferNoSchedule', 'NoExecute'`}},
			{"an injector", "policy: {injectorOptOuts: [istio, linkerd2]}\n", []string{`at '/policy/injectorOptOuts/1': value must be one of 'istio', 'linkerd', `}},
			{"a build's key", "policy: {builds: [{build: 10.0.20348, runtimeClass: windows-2022}]}\n", []string{`unknown key policy.builds[0].runtimeClass: did you mean policy.builds[0].runtimeClassName?`}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				file := e2eutil.ValuesFile(t, tc.values)
				_, stderr, err := e2eutil.RunHelm(t, e2eutil.TemplateArgs(t, file)...)
				checkHelmRefused(t, "helm template", err, stderr, tc.want)
				out, stderr, err := e2eutil.RunHelm(t, "lint", "--strict", e2eutil.ChartDir, "--values", file)
				checkHelmRefused(t, "helm lint", err, string(out)+stderr, tc.want)
			})
		}
		// As the issue typed it.
		_, stderr, err := e2eutil.RunHelm(t, "template", "wincompat", e2eutil.ChartDir, "--namespace", e2eutil.OwnNamespace, "--set", "tls.mode=selfmanaged")
		checkHelmRefused(t, "helm template --set tls.mode=selfmanaged", err, stderr, []string{`value must be one of 'cert-manager', 'self-managed'`})
	})

	t.Run("every allowed value of a closed set renders", func(t *testing.T) {
		schema := chartSchema(t)
		enums := enumValues(schema, schema, nil)
		if len(enums) < 15 {
			t.Fatalf("only %d closed sets found in the schema", len(enums))
		}
		for _, e := range enums {
			for _, v := range e.values {
				values := map[string]any{}
				setValue(values, e.path, v)
				if strings.Join(e.path, ".") == "imageResolver.cloudCredentials.[*]" {
					// Cloud identity needs a namespace scope, as a pull secret does, and the API server's
					// client certificate (the checks below).
					setValue(values, []string{"imageResolver", "pullSecretNamespaces"}, "kubernetes.io/metadata.name")
					setValue(values, []string{"webhook", "clientAuth", "caConfigMap"}, "apiserver-ca")
				}
				data, err := yaml.Marshal(values)
				if err != nil {
					t.Fatal(err)
				}
				if out, stderr, err := e2eutil.RunHelm(t, e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t, string(data)))...); err != nil {
					t.Errorf("%s=%v: %v\n%s%.300s", strings.Join(e.path, "."), v, err, stderr, out)
				}
			}
		}
	})

	t.Run("documented values render and lint", func(t *testing.T) {
		// The keys the chart sets from its own values, and refuses in the policy value, left out.
		var defaultPolicy map[string]any
		if err := yaml.Unmarshal(policy.Default().YAML(), &defaultPolicy); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"apiVersion", "kind", "linuxByDefault", "linuxByDefaultExcludedNamespaces", "podImagePullSecrets"} {
			delete(defaultPolicy, key)
		}
		wholePolicy, err := yaml.Marshal(map[string]any{"policy": defaultPolicy})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, values string }{
			{"defaults", ""},
			{"non-default values", e2eutil.NonDefaultValues},
			// values.yaml's example of the rewrites that narrow.
			{"narrowing rewrites", "policy:\n  userForRunAsNonRoot: true\n  memoryLimits: {fromRequests: true, default: 512Mi}\n"},
			// Every key `wincompat policy` prints, with its default: the generated schema takes them all.
			{"the whole default policy", string(wholePolicy)},
			// A policy file reads any scalar as its text: an unquoted 2019 is the name "2019".
			{"scalars as policy strings", "policy:\n  defaultBuild: 2022\n  windowsNodeTaints: [{key: windows, value: true, effect: NoSchedule}]\n  builds: [{build: 10.0.20348, names: [2022], imageTags: [ltsc2022], runtimeClassName: windows-2022}]\n"},
			{"timeouts in milliseconds and seconds", "imageResolver: {timeout: 0.5s, maxLookupsPerRegistry: \"\"}\nwebhook: {timeoutSeconds: 2, readTimeout: 1m30s, maxReviewBytesInFlight: 128Mi}\n"},
			{"a TLS version as a number", "tls: {minVersion: 1.3}\n"},
			{"a verbosity", "logLevel: 2\n"},
			{"a percentage", "podDisruptionBudget: {minAvailable: 50%}\n"},
			{"client certificates", "webhook: {clientAuth: {caConfigMap: apiserver-ca, caKey: ca.crt, names: [kube-apiserver-webhook-client]}}\nimageResolver: {podPullSecrets: true}\n"},
			{"API server peers", "networkPolicy: {apiServerPeers: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}, podSelector: {matchLabels: {app: konnectivity-agent}}}]}\n"},
			{"Linux by default everywhere", "linuxByDefault: {allNamespaces: true, excludedNamespaces: [kube-system, monitoring], failurePolicy: Fail}\n"},
			// No replica where no webhook of pods fails closed.
			{"no replica with failurePolicy Ignore", "replicaCount: 0\nwebhook: {failurePolicy: Ignore}\n"},
			{"no replica with hybrid", "replicaCount: 0\nengine: hybrid\n"},
			// Helm removes a null value: the Deployment's own default of 1 replica, not 0.
			{"replicaCount null", "replicaCount: null\n"},
			// What an umbrella chart passes: its globals (others' too) and its dependency condition.
			{"an umbrella chart's values", "global: {imageRegistry: registry.internal:5000/mirror, imagePullSecrets: [{name: a}, b], storageClass: fast}\nenabled: true\nimage: {pullSecrets: [c]}\n"},
			{"a default build in capitals", "policy: {defaultBuild: LTSC2022}\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				file := e2eutil.ValuesFile(t, tc.values)
				e2eutil.Helm(t, e2eutil.TemplateArgs(t, file)...)
				args := []string{"lint", "--strict", e2eutil.ChartDir}
				if file != "" {
					args = append(args, "--values", file)
				}
				e2eutil.Helm(t, args...)
			})
		}
	})

	t.Run("values.yaml and the schema name the same keys", func(t *testing.T) {
		root, _ := controlplane.RepoRoot()
		data, err := os.ReadFile(filepath.Join(root, e2eutil.ChartDir, "values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var values map[string]any
		if err := yaml.Unmarshal(data, &values); err != nil {
			t.Fatal(err)
		}
		schema := chartSchema(t)
		compareKeys(t, "", values, schema)
		checkKeysOpen(t, "", schema)
	})

	// Behind the schema, the chart's own checks hold for what a schema cannot say, and for a render with
	// --skip-schema-validation.
	t.Run("the chart's own checks", func(t *testing.T) {
		for _, tc := range []struct {
			name, values string
			skipSchema   bool
			want         string
		}{
			{"engine without the schema", "engine: turbo\n", true, `engine "turbo": use auto, webhook or hybrid`},
			{"maxLookups without the schema", "imageResolver: {maxLookups: 0}\n", true, `imageResolver.maxLookups "0": use a whole number of at least 1`},
			{"timeout not under timeoutSeconds", "imageResolver: {timeout: 2s}\nwebhook: {timeoutSeconds: 2}\n", false, "imageResolver.timeout 2s is not under webhook.timeoutSeconds (2)"},
			{"timeout over 2s", "imageResolver: {timeout: 2500ms}\nwebhook: {timeoutSeconds: 5}\n", false, "imageResolver.timeout 2500ms: use more than 0 and at most 2s"},
			{"pull secret without namespaces", "imageResolver: {pullSecret: registry-creds}\n", false, "imageResolver.pullSecretNamespaces is required with imageResolver.pullSecret"},
			{"cloud credentials without namespaces", "imageResolver: {cloudCredentials: [ecr]}\n", false, "imageResolver.pullSecretNamespaces is required with imageResolver.cloudCredentials"},
			// Any caller of the webhook port names the namespace whose lookups use wincompat's cloud identity.
			{"cloud credentials without client certificates", "imageResolver: {cloudCredentials: [ecr], pullSecretNamespaces: a=b}\n", false, "imageResolver.cloudCredentials needs webhook.clientAuth.caConfigMap"},
			{"policy.linuxByDefault", "policy: {linuxByDefault: true}\n", false, "policy.linuxByDefault is set by linuxByDefault.allNamespaces"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				args := e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t, tc.values))
				if tc.skipSchema {
					args = append(args, "--skip-schema-validation")
				}
				_, stderr, err := e2eutil.RunHelm(t, args...)
				checkHelmRefused(t, "helm template", err, stderr, []string{tc.want})
			})
		}
	})
}

// checkHelmRefused fails unless helm failed with every string of want in its output.
func checkHelmRefused(t *testing.T, what string, err error, output string, want []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s succeeded, want an error with %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(output, w) {
			t.Errorf("%s: error without %q:\n%s", what, w, output)
		}
	}
}

// chartSchema is the chart's values.schema.json.
func chartSchema(t *testing.T) map[string]any {
	t.Helper()
	root, _ := controlplane.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, e2eutil.ChartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

// resolveRef follows a schema's $ref within the document root.
func resolveRef(root, s map[string]any) map[string]any {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	cur := root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur, _ = cur[part].(map[string]any)
	}
	return cur
}

type enumAt struct {
	path   []string // "[*]" for a list's item
	values []any
}

// enumValues lists the closed sets under s with their paths, anyOf alternatives included.
func enumValues(root, s map[string]any, path []string) []enumAt {
	s = resolveRef(root, s)
	var out []enumAt
	if e, ok := s["enum"].([]any); ok {
		out = append(out, enumAt{slices.Clone(path), e})
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, a := range alts {
			out = append(out, enumValues(root, a.(map[string]any), path)...)
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			out = append(out, enumValues(root, props[name].(map[string]any), append(path, name))...)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		out = append(out, enumValues(root, items, append(path, "[*]"))...)
	}
	return out
}

// setValue sets v at path in values; [*] makes a one-item list.
func setValue(values map[string]any, path []string, v any) {
	name := path[0]
	switch {
	case len(path) == 1:
		values[name] = v
	case path[1] == "[*]" && len(path) == 2:
		values[name] = []any{v}
	case path[1] == "[*]":
		item := map[string]any{}
		setValue(item, path[2:], v)
		values[name] = []any{item}
	default:
		inner, ok := values[name].(map[string]any)
		if !ok {
			inner = map[string]any{}
			values[name] = inner
		}
		setValue(inner, path[1:], v)
	}
}

// compareKeys holds values.yaml against the schema: wherever the schema names an object's keys and
// allows no others (the chart's values-check.yaml refuses the others), values.yaml documents exactly
// those keys. Kubernetes shapes and global (open objects) and the policy ($ref, whose keys `wincompat
// policy` documents) end the walk.
func compareKeys(t *testing.T, path string, values any, s map[string]any) {
	t.Helper()
	_, ref := s["$ref"]
	_, open := s["additionalProperties"]
	if _, named := s["properties"]; ref || open || !named {
		return
	}
	m, ok := values.(map[string]any)
	if !ok {
		t.Errorf("%s: values.yaml has %T where the schema has an object of keys", pathOrTop(path), values)
		return
	}
	props, _ := s["properties"].(map[string]any)
	for name := range m {
		if _, ok := props[name]; !ok {
			t.Errorf("%s: values.yaml's key %s is not in values.schema.json", pathOrTop(path), name)
		}
	}
	for name, p := range props {
		v, ok := m[name]
		if !ok {
			t.Errorf("%s: the schema's key %s is not in values.yaml, where every value is documented", pathOrTop(path), name)
			continue
		}
		compareKeys(t, path+"."+name, v, p.(map[string]any))
	}
}

// checkKeysOpen: no object of the schema is closed to its keys there, since Helm would then refuse an
// unknown key with its own message, which names no key, before the chart's values-check.yaml can name the
// closest; an open object says so with additionalProperties: true or a schema of its values.
func checkKeysOpen(t *testing.T, path string, s map[string]any) {
	t.Helper()
	if s["additionalProperties"] == false {
		t.Errorf("%s: additionalProperties false", pathOrTop(path))
	}
	if _, ok := s["propertyNames"]; ok {
		t.Errorf("%s: propertyNames", pathOrTop(path))
	}
	for _, key := range []string{"properties", "definitions"} {
		if m, ok := s[key].(map[string]any); ok {
			for name, p := range m {
				checkKeysOpen(t, path+"."+name, p.(map[string]any))
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		checkKeysOpen(t, path+"[*]", items)
	}
}

func pathOrTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return strings.TrimPrefix(path, ".")
}
