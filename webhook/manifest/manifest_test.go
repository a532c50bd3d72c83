package manifest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
)

func opts() Options {
	return Options{
		Policy:    policy.Default(),
		Namespace: policy.Namespace{Name: "demo", Labels: map[string]string{policy.LabelEnabled: "true"}},
		Version:   "test",
	}
}

const service = `# Source: chart/templates/service.yaml
apiVersion: v1
kind: Service
metadata:   {name: web}   # odd spacing survives
spec:
  ports: [{port: 80}]
`

const windowsPod = `# Source: chart/templates/pod.yaml
apiVersion: v1
kind: Pod
metadata:
  name: web # the name
spec:
  os: {name: windows}
  securityContext:
    runAsUser: 1000
  containers:
  - name: web
    image: mcr.microsoft.com/windows/nanoserver:ltsc2019
`

func TestProcessPassesUntouchedDocumentsThroughByteForByte(t *testing.T) {
	linuxPod := strings.ReplaceAll(windowsPod, "windows}", "linux}")
	src := "---\n" + service + "---\n" + linuxPod + "...\n"
	var out bytes.Buffer
	docs, err := Process("in.yaml", []byte(src), &out, opts())
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != src {
		t.Errorf("untouched stream changed:\n%s", out.String())
	}
	if len(docs) != 1 || docs[0].Mutated {
		t.Errorf("docs: %+v", docs)
	}
}

func TestProcessMutatesAndKeepsComments(t *testing.T) {
	src := service + "---\n" + windowsPod
	var out bytes.Buffer
	docs, err := Process("in.yaml", []byte(src), &out, opts())
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.HasPrefix(got, service+"---\n") {
		t.Errorf("first document changed:\n%s", got)
	}
	for _, want := range []string{"# Source: chart/templates/pod.yaml", "# the name", "runAsUserName: ContainerUser", "kubernetes.io/os: windows", "runtimeClassName: windows-2019"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "runAsUser:") {
		t.Errorf("runAsUser survived:\n%s", got)
	}
	if len(docs) != 1 || !docs[0].Mutated || docs[0].Label() != "in.yaml#2 Pod demo/web" || len(docs[0].Warnings) == 0 {
		t.Errorf("docs: %+v", docs)
	}
	// The output is what the API server would store after the webhook: mutating it again is a no-op.
	var again bytes.Buffer
	docs2, err := Process("out.yaml", out.Bytes(), &again, opts())
	if err != nil || docs2[0].Mutated || again.String() != got {
		t.Errorf("second pass changed the output (err %v):\n%s", err, again.String())
	}
}

func TestProcessFallsBackWhenTheTreeCannotBePatched(t *testing.T) {
	// The securityContext is an alias of an anchor: editing it in place would change the anchor too.
	src := "x-defaults: &sc {runAsUser: 1000}\napiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  os: {name: windows}\n  securityContext: *sc\n  containers: [{name: web, image: app:ltsc2022}]\n"
	var out bytes.Buffer
	docs, err := Process("in.yaml", []byte(src), &out, opts())
	if err != nil {
		t.Fatal(err)
	}
	// The diff compares plain YAML with plain YAML: the flow mappings the input wrote are no change.
	var diff bytes.Buffer
	if err := WriteDiff(&diff, docs); err != nil || !docs[0].plain || strings.Contains(diff.String(), "-metadata:") || !strings.Contains(diff.String(), "\n-    runAsUser: 1000\n") {
		t.Errorf("fallback diff (err %v):\n%s", err, diff.String())
	}
	js, err := sigsyaml.YAMLToJSON(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"securityContext":{"windowsOptions":{"runAsUserName":"ContainerUser"}}`) || !strings.Contains(string(js), `"x-defaults":{"runAsUser":1000}`) {
		t.Errorf("fallback rendering wrong: %s", js)
	}
}

func TestProcessBadInput(t *testing.T) {
	big := strings.Repeat("# padding line to make the input large\n", 10<<20/40)
	for name, tc := range map[string]struct {
		src  string
		want string
	}{
		"invalid YAML":          {service + "---\nkind: Pod\n  bad: [indent\n", "in.yaml#2: invalid YAML"},
		"not an object":         {"---\n- a\n- b\n", "in.yaml#1: document is a YAML list, not a Kubernetes object"},
		"scalar":                {"just text\n", "in.yaml#1: document is a YAML scalar"},
		"no kind":               {"metadata: {name: x}\n", "in.yaml#1: document has no apiVersion or kind"},
		"wrong type in a field": {strings.Replace(windowsPod, "runAsUser: 1000", "runAsUser: lots", 1), "in.yaml#1 Pod demo/web: decoding Pod: json: cannot unmarshal string into Go struct field"},
		"wrong metadata type":   {"apiVersion: v1\nkind: Pod\nmetadata: [1]\n", "in.yaml#1: apiVersion, kind or metadata has the wrong type"},
		"error after big input": {big + "---\n: :\n  - x: [\n", "in.yaml#2: invalid YAML"},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := Process("in.yaml", []byte(tc.src), &out, opts())
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			if out.Len() != 0 {
				t.Errorf("output written despite the error")
			}
		})
	}
}

func TestProcessLargeInput(t *testing.T) {
	// About 10 MB of Windows pods: every one is mutated, none lost.
	var src bytes.Buffer
	n := 0
	for src.Len() < 10<<20 {
		n++
		fmt.Fprintf(&src, "---\n%s", strings.Replace(windowsPod, "name: web #", fmt.Sprintf("name: web-%d #", n), 1))
		src.WriteString(strings.Repeat("# filler comment to reach the size of a large release quickly\n", 40))
	}
	var out bytes.Buffer
	docs, err := Process("big.yaml", src.Bytes(), &out, opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != n || !docs[n-1].Mutated || strings.Count(out.String(), "runtimeClassName: windows-2019") != n {
		t.Errorf("%d documents in, %d processed", n, len(docs))
	}
}

func TestProcessListIsPassedThroughWithAWarning(t *testing.T) {
	src := "apiVersion: v1\nkind: List\nitems: []\n"
	var out bytes.Buffer
	docs, err := Process("in.yaml", []byte(src), &out, opts())
	if err != nil || out.String() != src || len(docs) != 1 || len(docs[0].Warnings) != 1 {
		t.Errorf("List: err %v docs %+v out %q", err, docs, out.String())
	}
}

func TestSplitDocuments(t *testing.T) {
	chunks := splitDocuments([]byte("a: 1\n--- \nb: 2\n---\n---\nc: 3"))
	if len(chunks) != 4 || string(chunks[0].body) != "a: 1\n" || chunks[1].separator != "--- \n" || len(chunks[2].body) != 0 || string(chunks[3].body) != "c: 3" {
		t.Errorf("chunks: %+v", chunks)
	}
}

// In warn mode the stream comes out byte for byte, and the warnings are enforce mode's, conditional.
func TestProcessWarnModeChangesNothing(t *testing.T) {
	src := service + "---\n" + windowsPod
	var enforced bytes.Buffer
	enforceDocs, err := Process("in.yaml", []byte(src), &enforced, opts())
	if err != nil || len(enforceDocs) != 1 || !enforceDocs[0].Mutated {
		t.Fatalf("enforce: %+v %v", enforceDocs, err)
	}
	warn := opts()
	warn.Namespace.Labels[policy.LabelMode] = policy.ModeWarn
	var out bytes.Buffer
	docs, err := Process("in.yaml", []byte(src), &out, warn)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != src || len(docs) != 1 || docs[0].Mutated || len(docs[0].Patch) != 0 {
		t.Errorf("warn mode changed the stream (docs %+v):\n%s", docs, out.String())
	}
	if len(docs[0].Warnings) != len(enforceDocs[0].Warnings) {
		t.Fatalf("warn mode warnings %q, enforce %q", docs[0].Warnings, enforceDocs[0].Warnings)
	}
	for i, w := range docs[0].Warnings {
		if !strings.HasPrefix(w, "wincompat (warn mode)") || !strings.HasSuffix(w, enforceDocs[0].Warnings[i][strings.Index(enforceDocs[0].Warnings[i], " ")+1:]) {
			t.Errorf("warning %d: %q for enforce mode's %q", i, w, enforceDocs[0].Warnings[i])
		}
	}
}

// linuxOnlyImages answers every image lookup with an image that has no Windows entry.
type linuxOnlyImages struct{}

func (linuxOnlyImages) Lookup(_ context.Context, req policy.ImageRequest) map[string]policy.Image {
	out := map[string]policy.Image{}
	for _, ref := range req.Images {
		out[ref] = policy.Image{Platforms: []policy.Platform{{OS: "linux", Architecture: "amd64"}}}
	}
	return out
}
func (linuxOnlyImages) Warm(policy.ImageRequest) map[string]policy.Image { return nil }

// A refusal (imagesWithoutWindows: deny) is reported marked as wincompat's, once, as the webhook
// refuses it.
func TestProcessRefusalIsMarkedOnce(t *testing.T) {
	o := opts()
	o.Policy.ImagesWithoutWindows = policy.ImagesWithoutWindowsDeny
	o.Images = linuxOnlyImages{}
	var out bytes.Buffer
	_, err := Process("in.yaml", []byte(windowsPod), &out, o)
	const want = "in.yaml#1 Pod demo/web: wincompat: containers[web]: image mcr.microsoft.com/windows/nanoserver:ltsc2019 (linux/amd64) has no Windows entry and can never run on a Windows node; use a Windows image, or set imagesWithoutWindows: warn in the policy"
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

// A YAML error names the line in the file, not in its document: the third document of this file starts
// at line 12, and its error is on line 14.
func TestProcessYAMLErrorsNameTheFilesLine(t *testing.T) {
	src := service + "---\n" + // lines 1-6, separator on 7
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n" + // 8-10, separator on 11
		"apiVersion: v1\nkind: ConfigMap\n  bad: [indent\n" // 12-14
	for name, tc := range map[string]struct{ src, want string }{
		"third document":       {src, "in.yaml#3: invalid YAML: yaml: line 14: "},
		"first document":       {"apiVersion: v1\nkind: ConfigMap\n  bad: [indent\n", "in.yaml#1: invalid YAML: yaml: line 3: "},
		"after an opening ---": {"---\napiVersion: v1\nkind: ConfigMap\n  bad: [indent\n", "in.yaml#1: invalid YAML: yaml: line 4: "},
		"comments before it":   {"# a\n# b\n---\n# c\nkind: ConfigMap\nmetadata:\n\tname: tab\n", "in.yaml#2: invalid YAML: yaml: line 7: "},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Process("in.yaml", []byte(tc.src), &bytes.Buffer{}, opts())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v does not contain %q", err, tc.want)
			}
		})
	}
}

// Messages carry each warning's severity, what needs action first: a namespace mode label wincompat
// cannot read is a warning, told before the changes made as intended. Warnings are their texts.
func TestProcessMessagesPutWhatNeedsActionFirst(t *testing.T) {
	o := opts()
	o.Namespace.Labels[policy.LabelMode] = "Enforce"
	var out bytes.Buffer
	docs, err := Process("in.yaml", []byte(windowsPod), &out, o)
	if err != nil || len(docs) != 1 {
		t.Fatalf("%+v %v", docs, err)
	}
	ms := docs[0].Messages
	if len(ms) != len(docs[0].Warnings) || len(ms) < 3 {
		t.Fatalf("messages %q, warnings %q", ms, docs[0].Warnings)
	}
	note := -1
	for i, m := range ms {
		if m.Text != docs[0].Warnings[i] {
			t.Errorf("message %d %q, warning %q", i, m.Text, docs[0].Warnings[i])
		}
		if strings.Contains(m.Text, policy.LabelMode) {
			note = i
		}
		if i > 0 && m.Severity == policy.SeverityWarning && ms[i-1].Severity == policy.SeverityInfo {
			t.Errorf("warning %d %q after info %q", i, m.Text, ms[i-1].Text)
		}
	}
	if note < 0 || ms[note].Severity != policy.SeverityWarning || ms[len(ms)-1].Severity != policy.SeverityInfo {
		t.Errorf("the mode label's note is not a warning among the first: %q", ms)
	}
	var list bytes.Buffer
	if docs, err := Process("in.yaml", []byte("apiVersion: v1\nkind: List\nitems: []\n"), &list, opts()); err != nil || len(docs) != 1 ||
		len(docs[0].Messages) != 1 || docs[0].Messages[0].Severity != policy.SeverityWarning {
		t.Errorf("a List is not a warning: %+v %v", docs, err)
	}
}
