package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestHelmChartPolicyAsPolicyFile: issue 43. The chart's validation of its policy value and `wincompat
// policy`'s of a policy file are one: helm template renders a policy value exactly when `wincompat
// policy` accepts the policy file the chart renders from it (the value itself as a file, where the chart
// refuses it). policy.defaultBuild=ltsc2021 rendered before, and wincompat then refused the ConfigMap.
func TestHelmChartPolicyAsPolicyFile(t *testing.T) {
	bin := e2eutil.BuildWincompat(t)
	for _, tc := range []struct {
		name, policy string
		accepted     bool // by both: the table holds both sides
	}{
		{"a build's name", "defaultBuild: ltsc2022", true},
		{"a name in capitals", "defaultBuild: LTSC2019", true},
		{"a name as a number", "defaultBuild: 2022", true},
		{"a build number with spaces", `defaultBuild: " 10.0.26100 "`, true},
		{"no default build", `defaultBuild: ""`, true},
		{"a name of its own catalog", "builds: [{build: 10.0.20348, names: [prod], runtimeClassName: windows-prod}]\ndefaultBuild: PROD", true},
		{"namespaces as scalars", "excludedNamespaces: [team-a, 2024, true]", true},
		{"a handler", "runtimeClassHandler: runhcs-wcow-hypervisor", true},
		{"closed sets", "mode: warn\nimagesWithoutWindows: deny\nwindowsNodeTaints: [{key: os, value: windows, effect: NoSchedule}]", true},
		{"a user of a domain", `nonRootUserName: "CORP\\svc-app"`, true},
		{"no user", `nonRootUserName: ""`, true},
		{"the default user named", "userForRunAsNonRoot: true", true},
		{"memory limits", "memoryLimits: {fromRequests: true, default: 1.5Gi}", true},
		{"a memory limit in bytes", "memoryLimits: {default: 536870912}", true},
		{"a taint of a prefix without a value", "windowsNodeTaints: [{key: example.com/os, value: \"\", effect: NoSchedule}]", true},
		{"a build without a RuntimeClass", `builds: [{build: 10.0.20348, names: [prod], runtimeClassName: ""}]`, true},

		{"the issue's build", "defaultBuild: ltsc2021", false},
		{"a name the catalog lacks, as a number", "defaultBuild: 2021", false},
		{"a build number the catalog lacks", `defaultBuild: "10.0.20349"`, false},
		{"a boolean build", "defaultBuild: true", false},
		{"a name of the default catalog, not of its own", "builds: [{build: 10.0.20348, names: [prod]}]\ndefaultBuild: ltsc2022", false},
		{"a namespace that is no DNS label", "excludedNamespaces: [Team_A]", false},
		{"a negative namespace", "linuxByDefaultExcludedNamespaces: [-1]", false},
		{"a handler that is no DNS label", "runtimeClassHandler: Runhcs_Process", false},
		{"a build number too short", `builds: [{build: "10.0.2034"}]`, false},
		{"a mode", "mode: warm", false},
		{"an injector", "injectorOptOuts: [linkerd2]", false},
		{"a taint's effect", "windowsNodeTaints: [{key: os, value: windows, effect: NoSchedul}]", false},
		{"a key", "imagesWithoutWindow: deny", false},
		{"an administrator", "nonRootUserName: Administrator", false},
		{"an administrator of a domain", `nonRootUserName: "CORP\\containeradministrator"`, false},
		{"a user with a slash", `nonRootUserName: "a/b"`, false},
		{"a user of dots", `nonRootUserName: "..."`, false},
		{"no user to name", "userForRunAsNonRoot: true\nnonRootUserName: \"\"", false},
		{"a memory limit in megabytes", "memoryLimits: {default: 512MB}", false},
		{"no memory", "memoryLimits: {default: 0Mi}", false},
		{"no memory as a number", "memoryLimits: {default: 0}", false},
		{"a taint key with a space", `windowsNodeTaints: [{key: "a b", value: x, effect: NoSchedule}]`, false},
		{"a taint value with a space", `windowsNodeTaints: [{key: os, value: "a b", effect: NoSchedule}]`, false},
		{"an empty catalog", "builds: []", false},
		{"a RuntimeClass that is no DNS name", `builds: [{build: 10.0.20348, runtimeClassName: A_B}]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := "policy:\n  " + strings.ReplaceAll(tc.policy, "\n", "\n  ") + "\n"
			out, stderr, err := e2eutil.RunHelm(t, e2eutil.TemplateArgs(t, e2eutil.ValuesFile(t, values))...)
			chartTakes := err == nil
			file := "apiVersion: wincompat.io/v1alpha1\nkind: Policy\n" + tc.policy + "\n"
			if chartTakes {
				file = ""
				for _, obj := range e2eutil.Manifests(t, out) {
					if obj.GetKind() == "ConfigMap" && obj.GetName() == "wincompat-policy" {
						file = obj.Object["data"].(map[string]any)["policy.yaml"].(string)
					}
				}
				if file == "" {
					t.Fatal("no policy ConfigMap rendered")
				}
			}
			path := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			policyOut, policyErr := exec.Command(bin, "policy", "--policy", path).CombinedOutput()
			policyTakes := policyErr == nil
			if chartTakes != policyTakes {
				t.Errorf("the chart renders it: %v; wincompat policy accepts it: %v\nhelm: %s\nwincompat policy: %.600s\nfile:\n%s", chartTakes, policyTakes, stderr, policyOut, file)
			}
			if !chartTakes && !strings.Contains(stderr, "policy") {
				t.Errorf("helm refused it for another reason than the policy value:\n%s", stderr)
			}
			if chartTakes != tc.accepted {
				t.Errorf("the chart renders it: %v, want %v\n%s", chartTakes, tc.accepted, stderr)
			}
		})
	}
}
