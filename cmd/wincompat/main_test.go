package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/policy/admissionpolicy"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

const pod = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  os: {name: windows}
  securityContext: {runAsUser: 1000}
  containers: [{name: web, image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}]
`

func TestMutateExamples(t *testing.T) {
	code, out, errOut := runCLI(t, "", "mutate", "-f", "../../deploy/examples")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// windows-pod.yaml's nanoserver:ltsc2022 runs on 2022 and, by containerd's rule, 2025 nodes.
	for _, want := range []string{"win-webserver", "iis-2019", "runtimeClassName: windows-2019", "- 10.0.26100", "wincompat.io/template-changes"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if !strings.Contains(errOut, "info: ../../deploy/examples/windows-pod.yaml#1 Pod default/nanoserver-shell: removed spec.securityContext.runAsUser") {
		t.Errorf("warnings: %s", errOut)
	}
}

func TestMutateStdinAsHelmPostRenderer(t *testing.T) {
	code, out, _ := runCLI(t, pod, "mutate")
	if code != 0 || !strings.Contains(out, "runAsUserName: ContainerUser") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

func TestMutateNamespaceFlags(t *testing.T) {
	noOS := strings.Replace(pod, "  os: {name: windows}\n", "", 1)
	code, out, _ := runCLI(t, noOS, "mutate", "--namespace-labels", "wincompat.io/enabled=true,wincompat.io/default-os=windows", "--namespace-annotations", "wincompat.io/build=ltsc2019", "--quiet")
	if code != 0 || !strings.Contains(out, "name: windows") {
		t.Errorf("default-os: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, pod, "mutate", "--namespace-labels", "team=web")
	if code != 0 || out != pod {
		t.Errorf("unlabelled namespace must pass through: exit %d\n%s", code, out)
	}
}

func TestMutateOutputPatch(t *testing.T) {
	code, out, errOut := runCLI(t, pod+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "mutate", "--output", "patch")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one JSON line (the Pod), got:\n%s", out)
	}
	var rec struct {
		Document int
		Kind     string
		Name     string
		Patch    []map[string]any
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Document != 1 || rec.Kind != "Pod" || rec.Name != "default/web" || len(rec.Patch) == 0 {
		t.Errorf("record: %+v", rec)
	}
}

func TestMutateConcatenatesFilesIntoOneStream(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.yaml", "b.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name[:1]+"}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := runCLI(t, "", "mutate", "-f", dir)
	if want := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}"; code != 0 || out != want {
		t.Errorf("exit %d, got:\n%q\nwant:\n%q", code, out, want)
	}
}

func TestMutateBadInput(t *testing.T) {
	dir := t.TempDir()
	badPolicy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(badPolicy, []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\ntolerations: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		"invalid YAML":       {pod + "---\n: [\n", nil, 1, "wincompat mutate: stdin#2: invalid YAML"},
		"not an object":      {"---\n42\n", nil, 1, "stdin#1: document is a YAML scalar"},
		"wrong type":         {strings.Replace(pod, "1000", "[1]", 1), nil, 1, "stdin#1 Pod default/web: decoding Pod"},
		"unknown policy key": {pod, []string{"--policy", badPolicy}, 1, `line 3: unknown key "tolerations"`},
		"missing file":       {"", []string{"-f", filepath.Join(dir, "nope.yaml")}, 1, "does not exist"},
		"bad output":         {pod, []string{"--output", "xml"}, 2, `--output "xml": use yaml, json, patch, explain or diff`},
		"bad labels":         {pod, []string{"--namespace-labels", "novalue"}, 2, `"novalue" is not key=value`},
		"stray argument":     {pod, []string{"file.yaml"}, 2, `unexpected argument "file.yaml"`},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.stdin, append([]string{"mutate"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q does not contain %q", code, tc.code, errOut, tc.want)
			}
			if out != "" {
				t.Errorf("stdout must be empty on error, got %q", out)
			}
		})
	}
}

func TestPolicyCommand(t *testing.T) {
	code, out, _ := runCLI(t, "", "policy")
	if code != 0 || !strings.Contains(out, "windowsNodeTaints:") || !strings.Contains(out, "# ") {
		t.Errorf("defaults: exit %d\n%s", code, out)
	}
	f := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: arm64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "", "policy", "--policy", f)
	if code != 0 || !strings.Contains(out, "arch: arm64") || !strings.Contains(out, "runtimeClassName: windows-2022") {
		t.Errorf("effective: exit %d\n%s", code, out)
	}
	// What it prints is the policy it loaded: read back, the same policy.
	if printed, err := policy.Load([]byte(out)); err != nil || printed.Arch != "arm64" || !equality.Semantic.DeepEqual(printed.Builds, policy.Default().Builds) {
		t.Errorf("the printed policy reads back as %+v, %v", printed, err)
	}
	if err := os.WriteFile(f, []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbuilds: [{build: 10.0.20348, runtimeClassName: Windows_2022}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "", "policy", "--policy", f)
	if want := `builds[0].runtimeClassName: Invalid value: "Windows_2022": not a valid RuntimeClass name`; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("invalid: exit %d, stderr lacks %q:\n%s", code, want, errOut)
	}
}

func TestUsage(t *testing.T) {
	if code, _, errOut := runCLI(t, ""); code != 2 || !strings.Contains(errOut, "Usage:") {
		t.Errorf("no args: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown: %d %s", code, errOut)
	}
	if code, out, _ := runCLI(t, "", "mutate", "-h"); code != 0 || !strings.Contains(out, "--post-renderer") {
		t.Errorf("mutate -h: %d %s", code, out)
	}
}

func TestServeValidatesFlagsBeforeStarting(t *testing.T) {
	var errOut bytes.Buffer
	code := run([]string{"serve", "--cert-dir", t.TempDir(), "--tls-min-version", "1.1", "--port", "0", "--image-max-lookups", "-1"}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	for _, want := range []string{`--tls-min-version "1.1": use 1.2 or 1.3`, "--port 0", "tls.crt", "mount the serving certificate Secret", "--image-max-lookups -1: use at least 1"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	// The port's bounds: none may be switched off (0 is the default), and names need a CA to read them from.
	errOut.Reset()
	code = run([]string{"serve", "--cert-dir", t.TempDir(), "--max-connections", "-1", "--read-timeout", "-1s",
		"--max-review-bytes-in-flight", "1Mi", "--client-names", "kube-apiserver"}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	for _, want := range []string{"--max-connections -1: use at least 1", "--read-timeout -1s", "--max-review-bytes-in-flight 1048576: use at least 36Mi", "--client-names needs --client-ca-file"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	// Cloud identity is the server's own credential: scoped to namespaces, as the pull secret is, and
	// only for the clouds wincompat knows.
	errOut.Reset()
	code = run([]string{"serve", "--cert-dir", t.TempDir(), "--image-cloud-credentials", "ecr,gar"}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	if want := "--image-cloud-credentials needs --image-pull-secret-namespaces"; code != 1 || !strings.Contains(errOut.String(), want) {
		t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, errOut.String())
	}
	// ECR credentials serve the operator's regions only: with none named nor in AWS_REGION, none at all.
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	errOut.Reset()
	code = run([]string{"serve", "--cert-dir", t.TempDir(), "--image-cloud-credentials", "ecr", "--image-pull-secret-namespaces", "a=b"}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	if want := "--image-cloud-credentials=ecr needs --image-ecr-regions"; code != 1 || !strings.Contains(errOut.String(), want) {
		t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, errOut.String())
	}
	errOut.Reset()
	code = run([]string{"serve", "--cert-dir", t.TempDir(), "--image-cloud-credentials", "ecr,aws"}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	if want := `unknown cloud "aws": use [acr ecr gar]`; code != 2 || !strings.Contains(errOut.String(), want) {
		t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, errOut.String())
	}
	var out bytes.Buffer
	if code := run([]string{"serve", "-h"}, strings.NewReader(""), &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "--enable-http2") {
		t.Errorf("serve -h: %d %s", code, out.String())
	}
}

// With --resolve-images the build comes from the registry: a tag that names no build, a 2022 entry
// (runs on 2022 and 2025), and a Linux-only sidecar that the deny policy refuses by name.
func TestMutateResolveImages(t *testing.T) {
	reg := registrytest.Start()
	defer reg.Close()
	app, err := reg.PushIndex("app", "1.4.2", types.OCIImageIndex, registrytest.Linux("amd64"), registrytest.Windows("10.0.20348.2227"))
	if err != nil {
		t.Fatal(err)
	}
	sidecar, err := reg.PushIndex("exporter", "v1", types.DockerManifestList, registrytest.Linux("amd64"), registrytest.Linux("arm64"))
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Replace(pod, "mcr.microsoft.com/windows/nanoserver:ltsc2022", app, 1)
	code, out, errOut := runCLI(t, in, "mutate", "--resolve-images")
	if code != 0 || !strings.Contains(out, "wincompat.io/build-source: image-manifest") || !strings.Contains(out, "- 10.0.20348") || !strings.Contains(out, "- 10.0.26100") {
		t.Errorf("exit %d: %s\n%s", code, errOut, out)
	}
	code, out, _ = runCLI(t, in, "mutate")
	if code != 0 || strings.Contains(out, "image-manifest") || strings.Contains(out, "windows-build") {
		t.Errorf("without --resolve-images the tag names no build: exit %d\n%s", code, out)
	}
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nimagesWithoutWindows: deny\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withSidecar := strings.Replace(in, "containers: [", "containers: [{name: exporter, image: "+sidecar+"}, ", 1)
	code, _, errOut = runCLI(t, withSidecar, "mutate", "--resolve-images", "--policy", policyFile)
	if code != 1 || !strings.Contains(errOut, "containers[exporter]: image "+sidecar+" (linux/amd64, linux/arm64) has no Windows entry") {
		t.Errorf("deny: exit %d: %s", code, errOut)
	}
}

func TestPolicyExport(t *testing.T) {
	code, out, stderr := runCLI(t, "", "policy", "export", "--exclude-namespace", "wincompat-system", "--policy", writePolicy(t, "nonRootUserName: WinUser\n"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	docs := strings.Split(out, "\n---\n")
	kinds := map[string]int{}
	for _, d := range docs {
		var o struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Data     map[string]string `json:"data"`
			Spec     struct {
				ParamRef *struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"paramRef"`
				MatchResources struct {
					NamespaceSelector struct {
						MatchExpressions []struct {
							Values []string `json:"values"`
						} `json:"matchExpressions"`
					} `json:"namespaceSelector"`
				} `json:"matchResources"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		kinds[o.Kind]++
		if o.Kind == "MutatingAdmissionPolicyBinding" && !strings.Contains(fmt.Sprint(o.Spec.MatchResources.NamespaceSelector.MatchExpressions), "wincompat-system") {
			t.Errorf("a binding does not exclude wincompat-system: %+v", o.Spec.MatchResources)
		}
		// The policy's values are in the params the bindings name, not in the policies.
		if o.Kind == "MutatingAdmissionPolicyBinding" && (o.Spec.ParamRef == nil || o.Spec.ParamRef.Name != admissionpolicy.DefaultParamsName || o.Spec.ParamRef.Namespace != "kube-system") {
			t.Errorf("binding %s reads params at %+v", o.Metadata.Name, o.Spec.ParamRef)
		}
		if o.Kind == "ConfigMap" && o.Data["nonRootUserName"] != "WinUser" {
			t.Errorf("the params do not carry the policy's nonRootUserName: %v", o.Data)
		}
		if o.Kind == "MutatingAdmissionPolicy" && strings.Contains(d, "WinUser") {
			t.Errorf("policy %s holds a value of the policy", o.Metadata.Name)
		}
	}
	if n := len(admissionpolicy.Names()); kinds["MutatingAdmissionPolicy"] != n || kinds["MutatingAdmissionPolicyBinding"] != n || kinds["ConfigMap"] != 1 {
		t.Errorf("kinds %v, want %d policies, as many bindings and the params ConfigMap", kinds, n)
	}
	if code, _, _ := runCLI(t, "", "policy", "export", "--policy", "/nonexistent"); code != 1 {
		t.Errorf("a missing policy file: exit %d, want 1", code)
	}
	// Policies exported without saying which serve runs beside them never gate: with none, nobody
	// would ever remove the gate.
	for mode, want := range map[string]string{"": "false", "fallback": "false", "lookup": "true", "gate": "true"} {
		args := []string{"policy", "export"}
		if mode != "" {
			args = append(args, "--image-resolver-mode", mode)
		}
		code, out, stderr := runCLI(t, "", args...)
		if code != 0 || !strings.Contains(out, "\n  gate: \""+want+"\"\n") {
			t.Errorf("--image-resolver-mode %q: exit %d, want the params' gate %q: %s", mode, code, want, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "", "policy", "export", "--image-resolver-mode", "lazy"); code != 2 || !strings.Contains(stderr, "use lookup, gate, fallback") {
		t.Errorf("an unknown mode: exit %d: %s", code, stderr)
	}
}

// --explain and --output diff on a chart of the shared corpus, declared Windows by its namespace, are
// pinned by goldens (UPDATE_GOLDEN=1 rewrites them); the diff must name every object the YAML output
// changed, and in warn mode nothing is applied.
func TestMutateExplainAndDiff(t *testing.T) {
	chart := filepath.Join("..", "..", "..", "shared", "corpus", "charts", "bitnami-postgresql.yaml")
	labels := "wincompat.io/enabled=true,wincompat.io/default-os=windows"
	for _, tc := range []struct{ golden, output string }{{"bitnami-postgresql.explain.txt", "explain"}, {"bitnami-postgresql.diff", "diff"}} {
		code, out, errOut := runCLI(t, "", "mutate", "-f", chart, "--namespace-labels", labels, "--quiet", "--output", tc.output)
		if code != 0 || strings.Contains(errOut, "info: ") {
			t.Fatalf("--output %s: exit %d: %s", tc.output, code, errOut)
		}
		path := filepath.Join("testdata", tc.golden)
		if os.Getenv("UPDATE_GOLDEN") == "1" {
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil || string(want) != out {
			t.Errorf("%s is stale or missing (UPDATE_GOLDEN=1 go test ./cmd/wincompat, then review): %v", path, err)
		}
	}
	_, yamlOut, _ := runCLI(t, "", "mutate", "-f", chart, "--namespace-labels", labels, "--quiet", "--output", "patch")
	_, diff, _ := runCLI(t, "", "mutate", "-f", chart, "--namespace-labels", labels, "--quiet", "--output", "diff")
	for _, line := range strings.Split(strings.TrimSpace(yamlOut), "\n") {
		var d struct {
			Document int   `json:"document"`
			Patch    []any `json:"patch"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		if changed := strings.Contains(diff, fmt.Sprintf("+++ b/%s#%d ", chart, d.Document)); changed != (len(d.Patch) > 0) {
			t.Errorf("document %d: patched %v, in the diff %v", d.Document, len(d.Patch) > 0, changed)
		}
	}
	code, out, _ := runCLI(t, "", "mutate", "-f", chart, "--namespace-labels", labels+",wincompat.io/mode=warn", "--explain")
	if code != 0 || !strings.Contains(out, "warn mode: nothing applied") || !strings.Contains(out, "strip table: ") {
		t.Errorf("warn mode --explain: exit %d\n%s", code, out)
	}
	if _, diff, _ := runCLI(t, "", "mutate", "-f", chart, "--namespace-labels", labels+",wincompat.io/mode=warn", "--output", "diff"); diff != "" {
		t.Errorf("warn mode changed objects:\n%s", diff)
	}
}

// A manifest's names reach the terminal escaped: the explain table and the warnings on stderr hold no
// raw escape sequence, carriage return or bidi override.
func TestMutateEscapesForTerminals(t *testing.T) {
	hostile := `apiVersion: v1
kind: Pod
metadata: {name: "web\e]0;owned\a\r\u202e"}
spec:
  os: {name: windows}
  securityContext: {runAsUser: 1000}
  containers: [{name: "c\e[2J", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022", securityContext: {procMount: "x\e[31m"}}]
`
	for _, args := range [][]string{{"mutate", "--explain"}, {"mutate"}} {
		code, out, errOut := runCLI(t, hostile, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if args[len(args)-1] == "mutate" && errOut == "" {
			t.Fatalf("%v: no warnings, so nothing was checked", args)
		}
		for name, s := range map[string]string{"stdout": out, "stderr": errOut} {
			if args[len(args)-1] == "mutate" && name == "stdout" {
				continue // YAML, which quotes and escapes
			}
			if strings.ContainsAny(s, "\x1b\x07\r\u202e") {
				t.Errorf("%v: %s holds a raw control or bidi character:\n%q", args, name, s)
			}
		}
	}
}

// writePolicy writes a policy file of the keys given over the defaults, and returns its path.
func writePolicy(t *testing.T, keys string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\n"+keys), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// A simulated namespace that is not opted in changes nothing, and says so with the flag value that
// would opt it in: --namespace-labels replaces the default label rather than adding to it. That value
// does opt it in. Input with no Pod or workload, or a namespace opted in, gets no such note.
func TestMutateSaysWhenNotOptedIn(t *testing.T) {
	for _, tc := range []struct{ labels, why, fix string }{
		{"wincompat.io/default-os=windows", "replaces the default wincompat.io/enabled=true", "--namespace-labels wincompat.io/enabled=true,wincompat.io/default-os=windows"},
		{"wincompat.io/enabled=yes", `label wincompat.io/enabled=yes does not opt the namespace in: only the value "true" does`, "--namespace-labels wincompat.io/enabled=true\n"},
		{"wincompat/enabled=true,team=web", "did you mean wincompat.io/enabled=true?", "--namespace-labels wincompat.io/enabled=true,team=web\n"},
	} {
		code, out, errOut := runCLI(t, pod, "mutate", "--namespace-labels", tc.labels)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != 0 || out != pod || len(lines) != 2 || !strings.HasPrefix(lines[0], "warning: nothing changed: ") ||
			!strings.Contains(lines[0], tc.why) || !strings.Contains(errOut, tc.fix) {
			t.Errorf("%s: exit %d, stderr:\n%s", tc.labels, code, errOut)
			continue
		}
		fix := strings.Fields(lines[1])
		code, out, errOut = runCLI(t, pod, "mutate", "--namespace-labels", fix[len(fix)-1])
		if code != 0 || out == pod || strings.Contains(errOut, "nothing changed") {
			t.Errorf("%s: the suggested %s changed nothing: exit %d, %s", tc.labels, fix[len(fix)-1], code, errOut)
		}
	}
	if code, _, errOut := runCLI(t, configMap("a"), "mutate", "--namespace-labels", "team=web"); code != 0 || errOut != "" {
		t.Errorf("no Pod: exit %d, stderr %q", code, errOut)
	}
	if _, _, errOut := runCLI(t, pod, "mutate"); strings.Contains(errOut, "nothing changed") {
		t.Errorf("opted in: %s", errOut)
	}
}

// What wincompat changed as intended is info, what needs action a warning; --quiet hides the info only.
func TestMutateSeverities(t *testing.T) {
	_, _, errOut := runCLI(t, pod, "mutate")
	for _, want := range []string{
		"info: stdin#1 Pod default/web: removed spec.securityContext.runAsUser from the pod (not supported on Windows)\n",
		"warning: stdin#1 Pod default/web: resources.limits.memory in containers[web]: no memory limit",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "warning: stdin#1 Pod default/web: removed") {
		t.Errorf("a change made as intended is a warning:\n%s", errOut)
	}
	_, _, quiet := runCLI(t, pod, "mutate", "--quiet")
	if strings.Contains(quiet, "info: ") || !strings.Contains(quiet, "warning: stdin#1 Pod default/web: resources.limits.memory") {
		t.Errorf("--quiet:\n%s", quiet)
	}
}
