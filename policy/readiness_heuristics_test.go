package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// heuristicDetectors are the detectors, by the name the tests render them with.
var heuristicDetectors = []struct {
	name   string
	detect func(*corev1.PodSpec) []readinessFinding
}{
	{"linuxCommands", linuxCommands},
	{"linuxScriptCommands", linuxScriptCommands},
	{"posixHostPaths", posixHostPaths},
	{"posixRuntimeHostPaths", posixRuntimeHostPaths},
	{"hostPathBlockDevices", hostPathBlockDevices},
	{"hostPathSocketsAndCharDevices", hostPathSocketsAndCharDevices},
	{"partialServiceNames", partialServiceNames},
}

// renderHeuristics runs every detector on spec: one "detector path = value" line per finding.
func renderHeuristics(spec *corev1.PodSpec) []string {
	var out []string
	for _, d := range heuristicDetectors {
		for _, f := range d.detect(spec) {
			out = append(out, d.name+" "+f.Path+" = "+string(f.Value))
		}
	}
	return out
}

func specYAML(t *testing.T, s string) *corev1.PodSpec {
	t.Helper()
	var spec corev1.PodSpec
	if err := yaml.UnmarshalStrict([]byte(s), &spec); err != nil {
		t.Fatalf("bad test spec: %v\n%s", err, s)
	}
	return &spec
}

type heuristicCase struct {
	name string
	spec string // a PodSpec in YAML
	want []string
}

func runHeuristicCases(t *testing.T, cases []heuristicCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := renderHeuristics(specYAML(t, tc.spec))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestHeuristicsStayBounded runs the detectors on a pod of 10,000 containers and megabyte-long strings:
// each reports at most maxFindingsPerRow, and each value stays small.
func TestHeuristicsStayBounded(t *testing.T) {
	long := strings.Repeat("é", 1<<19) // a megabyte, cut mid-rune if cut by bytes
	// Built once and shared by every container: the pod holds 10,000 references, not 10,000 copies.
	arg, env, script, proc, run := long+" http://a.b.svc:80", "a.b.svc:1 "+long, "/x/"+long+".sh", "/proc/"+long, "/run/"+long
	spec := &corev1.PodSpec{}
	for i := range 10000 {
		spec.Containers = append(spec.Containers, corev1.Container{
			Name:    "c" + strings.Repeat("x", i%7),
			Command: []string{"/bin/sh", "-c", long, "4", "5", "6"},
			Args:    []string{arg},
			Env:     []corev1.EnvVar{{Name: "E", Value: env}},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{script}}}},
		})
		spec.Volumes = append(spec.Volumes,
			corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: proc, Type: ptrTo(corev1.HostPathBlockDev)}}},
			corev1.Volume{Name: "w", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: run, Type: ptrTo(corev1.HostPathSocket)}}})
	}
	for _, d := range heuristicDetectors {
		got := d.detect(spec)
		if len(got) != maxFindingsPerRow {
			t.Errorf("%s: %d findings, want the cap %d", d.name, len(got), maxFindingsPerRow)
		}
		for _, f := range got {
			// A command is its program and a mark; a clipped string is 128 bytes, escaped for JSON at most 6
			// times over.
			if limit := 2 * (6*maxRecordedBytes + 3); len(f.Value) > limit {
				t.Errorf("%s %s: a value of %d bytes, more than %d", d.name, f.Path, len(f.Value), limit)
			}
			if strings.Contains(string(f.Value), `\ufffd`) {
				t.Errorf("%s %s: a rune was cut: %.80s", d.name, f.Path, f.Value)
			}
		}
	}
	if got := recordArgv(spec.Containers[0].Command); string(got) != `["/bin/sh","…"]` {
		t.Errorf("recorded command: %s", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestReadmeHeuristics generates the heuristic tables of README.md from the tables the detectors run.
func TestReadmeHeuristics(t *testing.T) {
	code := func(values []string) string { return "`" + strings.Join(values, "`, `") + "`" }
	var b strings.Builder
	b.WriteString("| argv[0] is | such as | certainty | why |\n| --- | --- | --- | --- |\n")
	for _, f := range commandForms {
		such := code(f.values)
		if f.kind == argv0WindowsPath {
			such = "`C:\\tools\\x`, `c:/x`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.form, such, f.certainty, f.why)
	}
	checkReadmeSection(t, "heuristic-commands", "TestReadmeHeuristics", b.String())

	b.Reset()
	b.WriteString("| host path, and what is under it | on Linux | certainty |\n| --- | --- | --- |\n")
	for i := 0; i < len(hostPathForms); {
		j := i + 1
		for j < len(hostPathForms) && hostPathForms[j].what == hostPathForms[i].what && hostPathForms[j].certainty == hostPathForms[i].certainty {
			j++
		}
		var prefixes []string
		for _, f := range hostPathForms[i:j] {
			prefixes = append(prefixes, f.prefix)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", code(prefixes), hostPathForms[i].what, hostPathForms[i].certainty)
		i = j
	}
	b.WriteString("\n| hostPath type | certainty | why |\n| --- | --- | --- |\n")
	for _, f := range hostPathTypeForms {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.hostPathType, f.certainty, f.why)
	}
	checkReadmeSection(t, "heuristic-host-paths", "TestReadmeHeuristics", b.String())

	b.Reset()
	b.WriteString("| form | example |\n| --- | --- |\n")
	for _, f := range serviceNameForms {
		fmt.Fprintf(&b, "| %s | `%s` |\n", f.form, f.example)
	}
	checkReadmeSection(t, "heuristic-service-names", "TestReadmeHeuristics", b.String())
}
