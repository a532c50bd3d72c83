package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The readiness table in README.md is generated from readinessChecks.
func TestReadmeReadinessTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| rule | detected (the warning) | why it fails on Windows | what wincompat does | source |\n| --- | --- | --- | --- | --- |\n")
	for _, c := range readinessChecks {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", c.rule, c.reason, c.why, c.does, c.source)
	}
	checkReadmeSection(t, "readiness", "TestReadmeReadinessTable", b.String())
}

// Each row finds what it is about and nothing in a pod that is ready for Windows; a finding is a warning
// with the row's rule and reason, and a recorded one finds its rule again by field and reason.
func TestReadinessChecks(t *testing.T) {
	const ready = `"resources":{"limits":{"memory":"256Mi"},"requests":{"memory":"256Mi"}}`
	for _, tc := range []struct {
		name   string
		pod    string
		labels map[string]string
		rule   Rule
		paths  []string // the row's findings, in order; none for a negative case
		from   []string
	}{
		{name: "no memory limit, init container included", rule: RuleMemoryNoLimit,
			pod:   `{"spec":{"os":{"name":"windows"},"initContainers":[{"name":"init","resources":{"requests":{"memory":"1Gi"}}}],"containers":[{"name":"app"},{"name":"ok",` + ready + `}]}}`,
			paths: []string{"spec.initContainers[init].resources.limits.memory", "spec.containers[app].resources.limits.memory"}, from: []string{"", ""}},
		{name: "a request below its limit", rule: RuleMemoryRequestNotLimit,
			pod:   `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","resources":{"limits":{"memory":"1Gi"},"requests":{"memory":"512Mi"}}}]}}`,
			paths: []string{"spec.containers[app].resources.requests.memory"}, from: []string{`"512Mi"`}},
		{name: "equal quantities written differently", rule: RuleMemoryRequestNotLimit,
			pod: `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","resources":{"limits":{"memory":"1Gi"},"requests":{"memory":"1073741824"}}}]}}`},
		{name: "a limit alone", rule: RuleMemoryRequestNotLimit,
			pod: `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","resources":{"limits":{"memory":"1Gi"}}}]}}`},
		{name: "runAsNonRoot on the pod, a user on one container", rule: RuleNonRootNoUser,
			pod:   `{"spec":{"os":{"name":"windows"},"securityContext":{"runAsNonRoot":true},"containers":[{"name":"app"},{"name":"named","securityContext":{"windowsOptions":{"runAsUserName":"ContainerUser"}}}]}}`,
			paths: []string{"spec.containers[app].securityContext.runAsNonRoot"}, from: []string{"true"}},
		{name: "a container's runAsNonRoot false overrides the pod's", rule: RuleNonRootNoUser,
			pod: `{"spec":{"os":{"name":"windows"},"securityContext":{"runAsNonRoot":true},"containers":[{"name":"app","securityContext":{"runAsNonRoot":false}}]}}`},
		{name: "the pod's user covers its containers", rule: RuleNonRootNoUser,
			pod: `{"spec":{"os":{"name":"windows"},"securityContext":{"runAsNonRoot":true,"windowsOptions":{"runAsUserName":"ContainerUser"}},"containers":[{"name":"app"}]}}`},
		{name: "the user Pod Security restricted gets is not reported", rule: RuleNonRootNoUser,
			labels: map[string]string{LabelPodSecurityEnforce: "restricted"},
			pod:    `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","securityContext":{"runAsNonRoot":true}}]}}`},
		{name: "the user kept for a removed runAsUser is not reported", rule: RuleNonRootNoUser,
			pod: `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","securityContext":{"runAsNonRoot":true,"runAsUser":1000}}]}}`},
		{name: "HostProcess pods choose their own account", rule: RuleNonRootNoUser,
			pod: `{"spec":{"os":{"name":"windows"},"hostNetwork":true,"securityContext":{"runAsNonRoot":true,"windowsOptions":{"hostProcess":true}},"containers":[{"name":"app"}]}}`},
		{name: "ContainerAdministrator, from the pod, any case", rule: RuleNonRootAdminUser,
			pod:   `{"spec":{"os":{"name":"windows"},"securityContext":{"windowsOptions":{"runAsUserName":"containeradministrator"}},"containers":[{"name":"app","securityContext":{"runAsNonRoot":true}}]}}`,
			paths: []string{"spec.containers[app].securityContext.windowsOptions.runAsUserName"}, from: []string{`"containeradministrator"`}},
		{name: "ContainerAdministrator without runAsNonRoot", rule: RuleNonRootAdminUser,
			pod: `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","securityContext":{"windowsOptions":{"runAsUserName":"ContainerAdministrator"}}}]}}`},
		{name: "subPath and subPathExpr", rule: RuleSubPath,
			pod:   `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app","volumeMounts":[{"name":"c","mountPath":"C:/app/config.yaml","subPath":"config.yaml"},{"name":"d","mountPath":"C:/data","subPathExpr":"$(POD)"},{"name":"e","mountPath":"C:/whole"}]}]}}`,
			paths: []string{"spec.containers[app].volumeMounts[C:/app/config.yaml].subPath", "spec.containers[app].volumeMounts[C:/data].subPathExpr"}, from: []string{`"config.yaml"`, `"$(POD)"`}},
		{name: "file modes but the default", rule: RuleVolumeFileMode,
			pod: `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app"}],"volumes":[
				{"name":"s","secret":{"secretName":"s","defaultMode":256,"items":[{"key":"k","path":"k","mode":384}]}},
				{"name":"c","configMap":{"name":"c","defaultMode":420}},
				{"name":"d","downwardAPI":{"items":[{"path":"labels","fieldRef":{"fieldPath":"metadata.labels"},"mode":256}]}},
				{"name":"p","projected":{"defaultMode":256,"sources":[{"configMap":{"name":"c","items":[{"key":"a","path":"a","mode":256}]}}]}}]}}`,
			paths: []string{"spec.volumes[s].secret.defaultMode", "spec.volumes[s].secret.items[k].mode", "spec.volumes[d].downwardAPI.items[labels].mode",
				"spec.volumes[p].projected.defaultMode", "spec.volumes[p].projected.sources[0].configMap.items[a].mode"},
			from: []string{"256", "384", "256", "256", "256"}},
		{name: "Secret volumes and projected Secrets", rule: RuleSecretOnDisk,
			pod: `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app"}],"volumes":[{"name":"s","secret":{"secretName":"tls"}},{"name":"c","configMap":{"name":"c"}},
				{"name":"p","projected":{"sources":[{"configMap":{"name":"c"}},{"secret":{"name":"creds"}}]}}]}}`,
			paths: []string{"spec.volumes[s].secret", "spec.volumes[p].projected.sources[1].secret"}, from: []string{`"tls"`, `"creds"`}},
		{name: "inline sources Windows cannot mount", rule: RuleUnmountableVolume,
			pod: `{"spec":{"os":{"name":"windows"},"containers":[{"name":"app"}],"volumes":[{"name":"n","nfs":{"server":"nfs.example.com","path":"/exports"}},
				{"name":"i","iscsi":{"targetPortal":"10.0.0.1:3260","iqn":"iqn.2001-04.com.example:storage","lun":0}},{"name":"r","rbd":{"monitors":["10.0.0.2"],"image":"foo"}},
				{"name":"smb","azureFile":{"secretName":"s","shareName":"share"}},{"name":"pvc","persistentVolumeClaim":{"claimName":"data"}}]}}`,
			paths: []string{"spec.volumes[n].nfs", "spec.volumes[i].iscsi", "spec.volumes[r].rbd"},
			from:  []string{`{"server":"nfs.example.com","path":"/exports"}`, `{"targetPortal":"10.0.0.1:3260","iqn":"iqn.2001-04.com.example:storage","lun":0}`, `{"monitors":["10.0.0.2"],"image":"foo"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideJSON(t, Default(), tc.pod, tc.labels, nil)
			var got []Change
			for _, c := range d.Changes {
				if c.Rule == tc.rule {
					got = append(got, c)
				}
			}
			if len(got) != len(tc.paths) {
				t.Fatalf("%d findings of %s, want %d: %+v", len(got), tc.rule, len(tc.paths), got)
			}
			row := rulesByCode[tc.rule]
			for i, c := range got {
				if c.Action != Warn || c.Path != tc.paths[i] || string(c.From) != tc.from[i] || len(c.To) != 0 {
					t.Errorf("finding %d: %+v, want a warning of %s from %s", i, c, tc.paths[i], tc.from[i])
				}
				if c.Reason != row.reasons[0] {
					t.Errorf("finding %d: reason %q, want the row's", i, c.Reason)
				}
				if f := c.MetricField(); f == OtherField {
					t.Errorf("finding %d: field %s is not among the rule's fields %v", i, c.Field(), row.fields)
				}
				if recorded, err := DecodeChanges(EncodeChanges([]Change{c})); err != nil || len(recorded) != 1 || RuleOf(recorded[0]) != tc.rule {
					t.Errorf("recorded finding %d reads back as %+v (%v), want rule %s", i, recorded, err, tc.rule)
				}
				if !strings.HasPrefix(d.Rule(c), "readiness (a warning): ") {
					t.Errorf("finding %d explained as %q", i, d.Rule(c))
				}
			}
		})
	}
}

// A Windows pod with what each row asks for has no readiness finding at all.
func TestReadyPodHasNoFinding(t *testing.T) {
	d := decideJSON(t, Default(), `{"spec":{"os":{"name":"windows"},"securityContext":{"runAsNonRoot":true,"windowsOptions":{"runAsUserName":"ContainerUser"}},
		"initContainers":[{"name":"init","resources":{"limits":{"memory":"64Mi"}}}],
		"containers":[{"name":"app","resources":{"limits":{"memory":"256Mi"},"requests":{"memory":"256Mi"}},"volumeMounts":[{"name":"c","mountPath":"C:/config"}]}],
		"volumes":[{"name":"c","configMap":{"name":"c","defaultMode":420}},{"name":"e","emptyDir":{}}]}}`, nil, nil)
	for _, c := range d.Changes {
		if c.Action == Warn {
			t.Errorf("unexpected warning %+v", c)
		}
	}
}

// A template is warned about what its pods will meet: what pod creation rewrites, and the readiness
// findings of the spec each pod will have. The template itself keeps those fields.
func TestTemplateWarnings(t *testing.T) {
	var dep appsv1.Deployment
	if err := json.Unmarshal([]byte(`{"spec":{"template":{"spec":{"os":{"name":"windows"},"dnsPolicy":"ClusterFirstWithHostNet","hostNetwork":true,
		"volumes":[{"name":"cache","emptyDir":{"medium":"Memory"}}],
		"containers":[{"name":"app","securityContext":{"runAsNonRoot":true},"volumeDevices":[{"name":"raw","devicePath":"/dev/x"}]}]}}}}`), &dep); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   map[string]Rule
	}{
		{name: "opted in", want: map[string]Rule{
			"spec.volumes[cache].emptyDir.medium":               RuleMemoryEmptyDir,
			"spec.dnsPolicy":                                    RuleDNSPolicy,
			"spec.containers[app].volumeDevices":                RuleVolumeDevices,
			"spec.hostNetwork":                                  RuleHostNetwork,
			"spec.containers[app].resources.limits.memory":      RuleMemoryNoLimit,
			"spec.containers[app].securityContext.runAsNonRoot": RuleNonRootNoUser,
		}},
		// Pod creation will name a user there: the template is not warned about one.
		{name: "Pod Security restricted", labels: map[string]string{LabelPodSecurityEnforce: "restricted"}, want: map[string]Rule{
			"spec.volumes[cache].emptyDir.medium":          RuleMemoryEmptyDir,
			"spec.dnsPolicy":                               RuleDNSPolicy,
			"spec.containers[app].volumeDevices":           RuleVolumeDevices,
			"spec.hostNetwork":                             RuleHostNetwork,
			"spec.containers[app].resources.limits.memory": RuleMemoryNoLimit,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := dep.DeepCopy()
			ns := Namespace{Name: "shop", Labels: map[string]string{LabelEnabled: "true"}}
			for k, v := range tc.labels {
				ns.Labels[k] = v
			}
			d, err := Default().Decide(obj, Facts{Operation: Create, Namespace: ns, Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Rule{}
			for _, c := range d.Changes {
				if c.Action == Warn {
					got[c.Path] = c.Rule
					if recorded, err := DecodeChanges(EncodeChanges([]Change{c})); err != nil || len(recorded) != 1 || RuleOf(recorded[0]) != c.Rule {
						t.Errorf("recorded %s (%q) does not read back with its rule %s: %+v, %v", c.Path, c.Reason, c.Rule, recorded, err)
					}
				} else if c.Rule == RuleMemoryEmptyDir || c.Rule == RuleDNSPolicy {
					t.Errorf("the template was rewritten: %+v", c)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("warnings %v, want %v", got, tc.want)
			}
			spec := obj.Spec.Template.Spec
			if spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet || spec.Volumes[0].EmptyDir.Medium != corev1.StorageMediumMemory {
				t.Errorf("the template lost what pod creation rewrites: %+v", spec)
			}
			if spec.SecurityContext != nil && spec.SecurityContext.WindowsOptions != nil {
				t.Errorf("the template got a user: %+v", spec.SecurityContext)
			}
		})
	}
}

// Every detector is linear in the pod's size and capped: a pod of 10,000 containers, each with a finding
// of every container row, gives each row maxFindingsPerRow findings, the first containers'.
func TestReadinessScales(t *testing.T) {
	const n = 10000
	spec := corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true)}}
	for i := range n {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "c" + strconv.Itoa(i),
			VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "C:/f", SubPath: "f"}}})
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "v" + strconv.Itoa(i), VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}})
	}
	rec := &recorder{}
	checkReadiness(&spec, rec)
	count := map[Rule]int{}
	for _, c := range rec.changes {
		count[c.Rule]++
	}
	for _, r := range []Rule{RuleMemoryNoLimit, RuleNonRootNoUser, RuleSubPath, RuleUnmountableVolume} {
		if count[r] != maxFindingsPerRow {
			t.Errorf("%s: %d findings, want %d", r, count[r], maxFindingsPerRow)
		}
	}
}
