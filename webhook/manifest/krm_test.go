package manifest

import (
	"bytes"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

const resourceList = `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
    namespace: shop
    annotations:
      config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/id: '1'
  spec:
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec:
        securityContext: {runAsUser: 1000}
        containers:
        - name: web
          image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: settings
    namespace: shop
    annotations:
      config.kubernetes.io/index: '1'
      internal.config.kubernetes.io/index: '1'
      internal.config.kubernetes.io/id: '2'
  data: {a: "1"}
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: wincompat
    annotations:
      config.kubernetes.io/function: |
        exec:
          path: wincompat
  data:
    namespace-labels: wincompat.io/enabled=true,wincompat.io/default-os=windows
`

type listOut struct {
	Kind  string           `json:"kind"`
	Items []map[string]any `json:"items"`
	// Results are the function's warnings and errors.
	Results []struct {
		Message     string            `json:"message"`
		Severity    string            `json:"severity"`
		ResourceRef map[string]string `json:"resourceRef"`
	} `json:"results"`
}

func runFunction(t *testing.T, in string) (listOut, error) {
	t.Helper()
	var out bytes.Buffer
	err := ProcessResourceList(strings.NewReader(in), &out, opts())
	var l listOut
	if uerr := sigsyaml.Unmarshal(out.Bytes(), &l); uerr != nil {
		t.Fatalf("the output is not a ResourceList: %v\n%s", uerr, out.String())
	}
	return l, err
}

// As a KRM function: the Windows workload (Windows by its namespace's default-os label, given in the
// functionConfig) is mutated, the ConfigMap comes back as it was, the orchestrator's annotations survive,
// and each warning is a result naming its object.
func TestProcessResourceList(t *testing.T) {
	if !IsResourceList([]byte(resourceList)) || IsResourceList([]byte(windowsPod)) {
		t.Fatal("IsResourceList tells the wrong input apart")
	}
	l, err := runFunction(t, resourceList)
	if err != nil {
		t.Fatal(err)
	}
	if l.Kind != "ResourceList" || len(l.Items) != 2 {
		t.Fatalf("got %s with %d items", l.Kind, len(l.Items))
	}
	deploy, _ := sigsyaml.Marshal(l.Items[0])
	for _, want := range []string{"wincompat.io/template-changes", "name: windows", "internal.config.kubernetes.io/id: \"1\"", "config.kubernetes.io/index: \"0\""} {
		if !strings.Contains(string(deploy), want) {
			t.Errorf("the Deployment lacks %q:\n%s", want, deploy)
		}
	}
	if strings.Contains(string(deploy), "runAsUser: 1000") {
		t.Errorf("runAsUser survived:\n%s", deploy)
	}
	cm, _ := sigsyaml.Marshal(l.Items[1])
	if strings.Contains(string(cm), "wincompat") {
		t.Errorf("the ConfigMap was touched:\n%s", cm)
	}
	if len(l.Results) == 0 {
		t.Fatal("no results for the warnings")
	}
	// What needs action (no memory limit) is a warning, first; what wincompat did as intended is info.
	severities := map[string]int{}
	for i, r := range l.Results {
		if !strings.HasPrefix(r.Message, "wincompat: ") || r.ResourceRef["kind"] != "Deployment" || r.ResourceRef["name"] != "web" {
			t.Errorf("result %+v", r)
		}
		severities[r.Severity]++
		want := "info"
		if strings.Contains(r.Message, "no memory limit") {
			want = "warning"
		}
		if r.Severity != want || (want == "warning") != (i == 0) {
			t.Errorf("result %d %q: severity %s, want %s, and only the first a warning", i, r.Message, r.Severity, want)
		}
	}
	if severities["warning"] != 1 || severities["info"] == 0 {
		t.Errorf("severities %v, want one warning and the changes as info", severities)
	}
	// With a Policy as functionConfig (and the namespace of opts, no default-os label): a Deployment that
	// declares Windows is mutated under that policy (nonRootUserName empty: no user set).
	withPolicy := resourceList[:strings.Index(resourceList, "functionConfig:")] + `functionConfig:
  apiVersion: wincompat.io/v1alpha1
  kind: Policy
  metadata: {name: wincompat}
  nonRootUserName: ""
`
	withPolicy = strings.Replace(withPolicy, "        securityContext: {runAsUser: 1000}", "        os: {name: windows}\n        securityContext: {runAsUser: 1000}", 1)
	l, err = runFunction(t, withPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if deploy, _ := sigsyaml.Marshal(l.Items[0]); !strings.Contains(string(deploy), "template-changes") || strings.Contains(string(deploy), "ContainerUser") {
		t.Errorf("the Policy functionConfig (nonRootUserName empty) was not applied:\n%s", deploy)
	}
}

// A bad functionConfig or a bad item fails the function with an error result, as mutate fails.
func TestProcessResourceListErrors(t *testing.T) {
	for name, in := range map[string]string{
		"unknown functionConfig kind": strings.Replace(resourceList, "  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: wincompat", "  apiVersion: example.com/v1\n  kind: Widget\n  metadata:\n    name: wincompat", 1),
		"unknown ConfigMap key":       strings.Replace(resourceList, "    namespace-labels:", "    labels:", 1),
		"bad policy":                  strings.Replace(resourceList, "    namespace-labels: ", "    policy: 'apiVersion: wincompat.io/v1alpha1\n\n      kind: Policy\n\n      arch: x86'\n    namespace-labels: ", 1),
		"item of the wrong type":      strings.Replace(resourceList, "runAsUser: 1000", `runAsUser: "x"`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			l, err := runFunction(t, in)
			if err == nil {
				t.Fatal("no error")
			}
			if len(l.Results) == 0 || l.Results[len(l.Results)-1].Severity != "error" {
				t.Errorf("results %+v", l.Results)
			}
		})
	}
}
