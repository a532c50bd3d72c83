package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeTree makes files (path → content) under a temporary directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// objectName finds the names of the test's objects, in YAML or JSON.
var objectName = regexp.MustCompile(`"?name"?: "?([a-z]+)`)

func configMap(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n"
}

// -f DIR reads what kubectl's -f reads (k8s.io/cli-runtime/pkg/resource: ExpandPathsToFileVisitors):
// the directory's own files with a manifest extension; subdirectories only with -R; a file named on its
// own whatever its extension; a path that does not exist as a glob.
func TestMutateFileArgumentsAsKubectl(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"a.yaml":              configMap("a"),
		"b.yml":               configMap("b"),
		"c.json":              `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}`,
		"notes.txt":           configMap("txt"),
		"sub/d.yaml":          configMap("d"),
		"sub/deeper/e.yaml":   configMap("e"),
		"only-sub/deep/f.yml": configMap("f"),
	})
	names := func(out string) string {
		var got []string
		for _, m := range objectName.FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		return strings.Join(got, " ")
	}
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		names string
		err   string
	}{
		{"directory: its own files", []string{"-f", dir}, 0, "a b c", ""},
		{"trailing slash", []string{"-f", dir + "/"}, 0, "a b c", ""},
		{"-R: subdirectories too", []string{"-f", dir, "-R"}, 0, "a b c f d e", ""},
		{"--recursive", []string{"--recursive", "-f", dir}, 0, "a b c f d e", ""},
		{"a file named on its own", []string{"-f", filepath.Join(dir, "notes.txt")}, 0, "txt", ""},
		{"glob", []string{"-f", filepath.Join(dir, "*.y*ml")}, 0, "a b", ""},
		{"only subdirectories", []string{"-f", filepath.Join(dir, "only-sub")}, 1, "", "no *.yaml, *.yml or *.json files (subdirectories are read with -R)"},
		{"only subdirectories, -R", []string{"-R", "-f", filepath.Join(dir, "only-sub")}, 0, "f", ""},
		{"missing", []string{"-f", filepath.Join(dir, "nope.yaml")}, 1, "", `the path "` + filepath.Join(dir, "nope.yaml") + `" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", append([]string{"mutate"}, tc.args...)...)
			if code != tc.code || names(out) != tc.names || !strings.Contains(errOut, tc.err) {
				t.Errorf("exit %d (want %d), objects %q (want %q), stderr %q (want %q)", code, tc.code, names(out), tc.names, errOut, tc.err)
			}
		})
	}
}

// The README's offline example: the examples directory gives the examples, not the Argo CD plugin and
// the kustomize files of its subdirectories, so that the output can go to kubectl apply.
func TestMutateExamplesDirectoryIsNotRecursive(t *testing.T) {
	code, out, errOut := runCLI(t, "", "mutate", "-f", "../../deploy/examples/", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, kind := range []string{"ConfigManagementPlugin", "Kustomization", "kind: ConfigMap"} {
		if strings.Contains(out, kind) {
			t.Errorf("output holds %s from a subdirectory", kind)
		}
	}
	if !strings.Contains(out, "nanoserver-shell") {
		t.Errorf("output lacks the examples:\n%s", out)
	}
}

// -o json prints what kubectl apply -o json prints: one object alone, several (or none) as a v1 List,
// so that the output is one JSON document; -o yaml is the stream, as without -o.
func TestMutateOutputJSON(t *testing.T) {
	dir := writeTree(t, map[string]string{"a.yaml": pod + "---\n# only a comment\n---\n" + configMap("a"), "b.json": `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}`})
	code, out, errOut := runCLI(t, "", "mutate", "-f", dir, "-o", "json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var list struct {
		APIVersion, Kind string
		Items            []struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				SecurityContext struct {
					WindowsOptions struct{ RunAsUserName string }
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, out)
	}
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 3 {
		t.Fatalf("want a v1 List of the Pod and two ConfigMaps, got:\n%s", out)
	}
	if it := list.Items[0]; it.Kind != "Pod" || it.Spec.SecurityContext.WindowsOptions.RunAsUserName != "ContainerUser" {
		t.Errorf("the Pod is not the mutated one:\n%s", out)
	}
	if got := list.Items[1].Metadata.Name + list.Items[2].Metadata.Name; got != "ab" {
		t.Errorf("items out of order: %s", got)
	}

	code, out, errOut = runCLI(t, pod, "mutate", "--output", "json", "--quiet")
	var one map[string]any
	if err := json.Unmarshal([]byte(out), &one); code != 0 || err != nil || one["kind"] != "Pod" {
		t.Errorf("one object is printed alone: exit %d, %v, %s\n%s", code, err, errOut, out)
	}
	if !strings.HasPrefix(out, "{\n    \"apiVersion\"") {
		t.Errorf("indented as kubectl indents (four spaces):\n%.40s", out)
	}

	_, yamlOut, _ := runCLI(t, pod, "mutate", "-o", "yaml", "--quiet")
	_, defaultOut, _ := runCLI(t, pod, "mutate", "--quiet")
	if yamlOut != defaultOut || !strings.Contains(yamlOut, "runAsUserName: ContainerUser") {
		t.Errorf("-o yaml is the stream:\n%s", yamlOut)
	}

	// A bad document prints nothing, as with YAML.
	code, out, _ = runCLI(t, pod+"---\n: [\n", "mutate", "-o", "json")
	if code != 1 || out != "" {
		t.Errorf("a bad document: exit %d, printed %q", code, out)
	}
}

// The usage's promise: when a document is invalid nothing is printed, even if other files were good.
func TestMutateBadFilePrintsNothing(t *testing.T) {
	dir := writeTree(t, map[string]string{"a.yaml": configMap("a"), "b.yaml": ": [\n"})
	for _, output := range []string{"yaml", "json", "patch", "explain", "diff"} {
		if code, out, _ := runCLI(t, "", "mutate", "-f", dir, "--output", output); code != 1 || out != "" {
			t.Errorf("-o %s: exit %d, printed %q", output, code, out)
		}
	}
}

// A YAML error names the line of the file: the third document's bad line is the file's line 11.
func TestMutateYAMLErrorNamesTheFilesLine(t *testing.T) {
	dir := writeTree(t, map[string]string{"chart.yaml": configMap("a") + "---\n" + configMap("b") + "---\napiVersion: v1\nkind: ConfigMap\n  bad: [indent\n"})
	code, _, errOut := runCLI(t, "", "mutate", "-f", filepath.Join(dir, "chart.yaml"))
	if want := "chart.yaml#3: invalid YAML: yaml: line 11: "; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %q lacks %q", code, errOut, want)
	}
}

// An unknown flag is said in two lines, as kubectl says it (in pflag's words), in every command: the
// error (with the nearest flag when one is near) and where the usage is; not the usage itself.
func TestUsageErrorsAreShort(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mutate", "--frobnicate"}, "wincompat mutate: unknown flag: --frobnicate\nSee 'wincompat mutate --help' for usage.\n"},
		{[]string{"mutate", "--ouptut", "json"}, "wincompat mutate: unknown flag: --ouptut; did you mean --output?\nSee 'wincompat mutate --help' for usage.\n"},
		{[]string{"mutate", "--quiet=maybe"}, "wincompat mutate: invalid argument \"maybe\" for \"--quiet\" flag: strconv.ParseBool: parsing \"maybe\": invalid syntax\nSee 'wincompat mutate --help' for usage.\n"},
		{[]string{"mutate", "chart.yaml"}, "wincompat mutate: unexpected argument \"chart.yaml\" (to read it: -f chart.yaml)\nSee 'wincompat mutate --help' for usage.\n"},
		{[]string{"serve", "--prot", "9443"}, "wincompat serve: unknown flag: --prot; did you mean --port?\nSee 'wincompat serve --help' for usage.\n"},
		{[]string{"audit", "--namespaces", "x"}, "wincompat audit: unknown flag: --namespaces; did you mean --namespace?\nSee 'wincompat audit --help' for usage.\n"},
		{[]string{"nodes", "--kubconfig", "x"}, "wincompat nodes: unknown flag: --kubconfig; did you mean --kubeconfig?\nSee 'wincompat nodes --help' for usage.\n"},
		{[]string{"policy", "--polcy", "x"}, "wincompat policy: unknown flag: --polcy; did you mean --policy?\nSee 'wincompat policy --help' for usage.\n"},
		{[]string{"policy", "export", "--exclude", "x"}, "wincompat policy export: unknown flag: --exclude; did you mean --exclude-namespace?\nSee 'wincompat policy export --help' for usage.\n"},
		{[]string{"policy", "exprot"}, "wincompat policy: unknown command \"exprot\"\n\nDid you mean this?\n\texport\n\nRun 'wincompat policy --help' for usage.\n"},
		{[]string{"mutat", "-f", "x"}, "wincompat: unknown command \"mutat\"\n\nDid you mean this?\n\tmutate\n\nRun 'wincompat --help' for usage.\n"},
		{[]string{"frobnicate"}, "wincompat: unknown command \"frobnicate\"\nRun 'wincompat --help' for usage.\n"},
	} {
		code, out, errOut := runCLI(t, "", tc.args...)
		if code != 2 || out != "" || errOut != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s\nwant:\n%s", tc.args, code, out, errOut, tc.want)
		}
	}
	// -h still prints the whole usage, with the flags, on stdout as kubectl does.
	for _, args := range [][]string{{"mutate", "-h"}, {"policy", "--help"}, {"policy", "export", "-h"}, {"nodes", "-h"}, {"audit", "-h"}, {"serve", "-h"}} {
		if code, out, _ := runCLI(t, "", args...); code != 0 || !strings.Contains(out, "Usage: wincompat") || !regexp.MustCompile(`Flags:\n +-`).MatchString(out) {
			t.Errorf("%v: exit %d:\n%.200s", args, code, out)
		}
	}
}

// Without a kubeconfig the commands that read the cluster say what to do, not client-go's
// KUBERNETES_MASTER hint. client-go reads $HOME when it starts, so the commands run in a child process
// with a home of their own.
func TestNoKubeconfigSaysWhatToDo(t *testing.T) {
	if args := os.Getenv("WINCOMPAT_TEST_CHILD_ARGS"); args != "" {
		code, _, errOut := runCLI(t, "", strings.Fields(args)...)
		fmt.Printf("exit %d: %s", code, errOut)
		return
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args, kubeconfigEnv, want string
	}{
		{"nodes", "", "no cluster to talk to: no kubeconfig at "},
		{"audit", "", "set KUBECONFIG, pass --kubeconfig FILE, or run wincompat in the cluster"},
		{"audit", "/nonexistent/config", "KUBECONFIG=/nonexistent/config names no cluster"},
		{"nodes --kubeconfig " + empty, "", empty + " names no cluster"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoKubeconfigSaysWhatToDo$")
		cmd.Env = []string{"WINCOMPAT_TEST_CHILD_ARGS=" + tc.args, "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		if tc.kubeconfigEnv != "" {
			cmd.Env = append(cmd.Env, "KUBECONFIG="+tc.kubeconfigEnv)
		}
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "exit 1: ") || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "KUBERNETES_MASTER") {
			t.Errorf("%s (KUBECONFIG=%q): want %q:\n%s", tc.args, tc.kubeconfigEnv, tc.want, out)
		}
	}
}
