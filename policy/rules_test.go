package policy

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// decideJSON decides on a pod written as JSON, in a namespace opted in with the labels given.
func decideJSON(t *testing.T, p *Policy, podJSON string, labels map[string]string, cluster *Cluster) Decision {
	t.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(podJSON), &pod); err != nil {
		t.Fatal(err)
	}
	ns := Namespace{Name: "shop", Labels: map[string]string{LabelEnabled: "true"}}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	d, err := p.Decide(&pod, Facts{Operation: Create, Namespace: ns, Cluster: cluster, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Each case is a rule that rules.go used to recognise by matching a change's path or reason. The change
// now carries its rule: the explanation holds when the reason is reworded, and two changes of the same
// path (the pod's runAsUserName, named for the non-root intent or for Pod Security) keep apart.
func TestChangesCarryTheirRule(t *testing.T) {
	type want struct {
		path    string
		rule    Rule
		explain string
	}
	const windowsPod = `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","image":"example.com/app:1"}]}}`
	strip := func(level FieldLevel, name string) Rule {
		return LinuxOnlyField{Level: level, Name: name}.Rule()
	}
	for _, tc := range []struct {
		name    string
		pod     string
		labels  map[string]string
		policy  func(*Policy)
		cluster *Cluster
		want    []want
	}{
		{name: "the strip table, the same row for every kind of container",
			pod: `{"spec":{"os":{"name":"windows"},"hostPID":true,"initContainers":[{"name":"init","securityContext":{"privileged":true}}],"containers":[{"name":"app","securityContext":{"privileged":false}}]}}`,
			want: []want{
				{"spec.hostPID", strip(PodLevel, "hostPID"), "strip table: spec.hostPID (rejected on Windows when true)"},
				{"spec.initContainers[init].securityContext.privileged", strip(ContainerSecurityContextLevel, "privileged"), "strip table: containers[*].securityContext.privileged (rejected on Windows when set)"},
				{"spec.containers[app].securityContext.privileged", strip(ContainerSecurityContextLevel, "privileged"), "strip table: containers[*].securityContext.privileged (rejected on Windows when set)"},
			}},
		{name: "spec.os inferred",
			pod:  `{"spec":{"nodeSelector":{"kubernetes.io/os":"windows"},"containers":[{"name":"app"}]}}`,
			want: []want{{"spec.os.name", RuleWindowsOS, "policy inferOSFromNodeSelector, or namespace label wincompat.io/default-os=windows"}}},
		{name: "runAsUserName for the non-root intent",
			pod:  `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","securityContext":{"runAsUser":1000}}]}}`,
			want: []want{{"spec.containers[app].securityContext.windowsOptions.runAsUserName", RuleNonRootIntent, "policy nonRootUserName"}}},
		{name: "runAsNonRoot and runAsUserName for Pod Security restricted",
			pod:    `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","securityContext":{"runAsNonRoot":false}}]}}`,
			labels: map[string]string{LabelPodSecurityEnforce: "restricted"},
			want: []want{
				{"spec.securityContext.runAsNonRoot", RuleRestrictedNonRoot, "policy podSecurityRestricted, namespace label pod-security.kubernetes.io/enforce=restricted"},
				{"spec.containers[app].securityContext.runAsNonRoot", RuleRestrictedNonRoot, "policy podSecurityRestricted, namespace label pod-security.kubernetes.io/enforce=restricted"},
				{"spec.securityContext.windowsOptions.runAsUserName", RuleRestrictedUser, "policy nonRootUserName"},
			}},
		{name: "the rewrites and a warning",
			pod: `{"metadata":{"annotations":{"seccomp.security.alpha.kubernetes.io/pod":"runtime/default"}},"spec":{"os":{"name":"windows"},"dnsPolicy":"ClusterFirstWithHostNet",
				"volumes":[{"name":"cache","emptyDir":{"medium":"Memory"}}],
				"containers":[{"name":"app","resources":{"limits":{"hugepages-2Mi":"10Mi"}},"volumeMounts":[{"name":"cache","mountPath":"/cache","mountPropagation":"HostToContainer"}],"volumeDevices":[{"name":"raw","devicePath":"/dev/x"}]}]}}`,
			want: []want{
				{"spec.volumes[cache].emptyDir.medium", RuleMemoryEmptyDir, "rewrite: memory-backed emptyDir"},
				{"spec.dnsPolicy", RuleDNSPolicy, "rewrite: dnsPolicy"},
				{"spec.containers[app].resources.limits[hugepages-2Mi]", RuleHugePages, "rewrite: huge pages"},
				{"metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]", RuleDeprecatedAnnotation, "rewrite: deprecated Linux security annotations"},
				{"spec.containers[app].volumeMounts[/cache].mountPropagation", RuleMountPropagation, "rewrite: mount propagation"},
				{"spec.containers[app].volumeDevices", RuleVolumeDevices, "a warning: nothing changed"},
			}},
		{name: "the injectors' opt-outs", pod: windowsPod,
			want: []want{
				{"metadata.labels", RuleInjectorOptOuts, "policy injectorOptOuts"},
				{"metadata.annotations", RuleInjectorOptOuts, "policy injectorOptOuts"},
			}},
		{name: "scheduling from the annotation", pod: `{"metadata":{"annotations":{"wincompat.io/build":"ltsc2022"}},"spec":{"os":{"name":"windows"},"containers":[{"name":"app"}]}}`,
			policy: func(p *Policy) { p.Arch = "amd64" },
			want: []want{
				{"spec.nodeSelector[kubernetes.io/os]", RuleWindowsNodeSelector, "Windows pods (always)"},
				{"spec.nodeSelector[kubernetes.io/arch]", RuleArch, "policy arch"},
				{"spec.tolerations", RuleWindowsTolerations, "policy windowsNodeTaints, and the OS taints of ready Windows nodes"},
				{"spec.nodeSelector[node.kubernetes.io/windows-build]", RuleBuild, "the Windows build 10.0.20348, from annotation"},
				{"spec.runtimeClassName", RuleRuntimeClass, "policy setRuntimeClassName and builds[].runtimeClassName; the Windows build 10.0.20348, from annotation"},
			}},
		{name: "several builds in required node affinity",
			pod:     `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","image":"mcr.microsoft.com/windows/nanoserver:ltsc2022"}]}}`,
			cluster: &Cluster{Builds: []string{"10.0.20348", "10.0.26100"}},
			want: []want{{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", RuleBuild,
				"the Windows build 10.0.20348,10.0.26100, from image"}}},
		{name: "pinned to Linux by a nodeSelector", pod: `{"spec":{"containers":[{"name":"app"}]}}`,
			labels: map[string]string{LabelDefaultOS: "linux"},
			want:   []want{{"spec.nodeSelector[kubernetes.io/os]", RuleLinuxByDefault, "policy linuxByDefault, or namespace label wincompat.io/default-os=linux"}}},
		{name: "pinned to Linux in required node affinity",
			pod:    `{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"Exists"}]}]}}},"containers":[{"name":"app"}]}}`,
			labels: map[string]string{LabelDefaultOS: "linux"},
			want: []want{{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions", RuleLinuxByDefault,
				"policy linuxByDefault, or namespace label wincompat.io/default-os=linux"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Default()
			if tc.policy != nil {
				tc.policy(p)
			}
			d := decideJSON(t, p, tc.pod, tc.labels, tc.cluster)
			for _, w := range tc.want {
				var found *Change
				for i := range d.Changes {
					if d.Changes[i].Path == w.path && (found == nil || d.Changes[i].Rule == w.rule) {
						found = &d.Changes[i]
					}
				}
				if found == nil {
					t.Fatalf("no change of %s among %+v", w.path, d.Changes)
				}
				if found.Rule != w.rule {
					t.Errorf("%s: rule %q, want %q", w.path, found.Rule, w.rule)
				}
				reworded := *found
				reworded.Reason = "reworded: " + found.Reason
				for _, c := range []Change{*found, reworded} {
					if got := d.Rule(c); got != w.explain {
						t.Errorf("%s (%q): explained as %q, want %q", w.path, c.Reason, got, w.explain)
					}
				}
			}
		})
	}
}

func TestRulesTable(t *testing.T) {
	seen := map[Rule]bool{}
	for _, r := range rulesTable {
		if r.rule == "" || seen[r.rule] || r.explain == nil || len(r.fields) == 0 {
			t.Errorf("row %q: a rule needs a code of its own, an explanation and its fields", r.rule)
		}
		seen[r.rule] = true
	}
	for _, f := range LinuxOnlyFields() {
		if !seen[f.Rule()] {
			t.Errorf("strip-table row %s has no rule", f.Path())
		}
	}
}
