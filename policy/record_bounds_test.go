package policy

import (
	"encoding/json"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxDecisionFactor bounds what one decision (Decide, then its warnings and record rendered) allocates,
// in bytes per byte of the object's JSON: linear, whatever the names. Measured on the shapes below, the
// rows that warn stay under 1 (their findings are capped; images' under 16, what each container's image
// is known to run), and the rows that act 17 to 36 times: each change a one-byte-named container gets
// costs what the change itself adds to the pod (a limit's map, a user's options), its Change, its path,
// a key in the merge's map and its record entry, about 1.5 KB, for some 40 bytes of JSON. Before names were clipped and paths built
// only when recorded, issue 40's reproduction allocated 1.4 GB for 1.3 MB.
const maxDecisionFactor = 40

// boundedShape is the worst shape of the rows named in rules: one element of what they act on or warn
// about, which the test repeats until the pod is about a mebibyte, once with names of 64 KiB (a path
// that repeated a name would repeat the review) and once with names of one byte (the most elements per
// byte). add gives pod element i, named name.
type boundedShape struct {
	name  string
	rules []Rule
	add   func(pod *corev1.Pod, i int, name string)
	// cluster, images, restricted and narrowing turn on what the rows need to fire: images says that
	// registries answered image for every image.
	cluster, images, restricted, narrowing bool
	image                                  Image
}

func windowsAt(version string) Platform {
	return Platform{OS: "windows", Architecture: "amd64", OSVersion: version}
}

// imageShape is a shape of containers whose images registries all describe as image.
func imageShape(name string, rule Rule, image Image) boundedShape {
	return boundedShape{name: name, rules: []Rule{rule}, cluster: true, images: true, image: image,
		add: func(pod *corev1.Pod, i int, name string) {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Image: name + "/" + strconv.Itoa(i)})
		}}
}

func secCtx() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		SELinuxOptions: &corev1.SELinuxOptions{User: "u"}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
		Capabilities:    &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, ReadOnlyRootFilesystem: new(true), Privileged: new(false),
		AllowPrivilegeEscalation: new(false), ProcMount: ptrTo(corev1.DefaultProcMount), RunAsUser: new(int64(1000)), RunAsGroup: new(int64(1000)),
	}
}

func hugeAndMemory() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		Requests: corev1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
}

var boundedShapes = []boundedShape{
	{name: "containers", rules: []Rule{
		RuleNonRootIntent, RuleHugePages, RuleStopSignal, RuleVolumeDevices, RuleMountPropagation,
		RuleMemoryRequestNotLimit, RuleSubPath, RuleLinuxCommand, RuleLinuxScriptCommand, RulePartialServiceName,
	}, add: func(pod *corev1.Pod, i int, name string) {
		c := corev1.Container{Name: name, Image: name, SecurityContext: secCtx(), Resources: hugeAndMemory(),
			Lifecycle:     &corev1.Lifecycle{StopSignal: ptrTo(corev1.SIGQUIT), PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/" + name + ".sh"}}}},
			VolumeDevices: []corev1.VolumeDevice{{Name: name, DevicePath: name}},
			VolumeMounts:  []corev1.VolumeMount{{Name: name, MountPath: name, SubPath: name, MountPropagation: ptrTo(corev1.MountPropagationHostToContainer)}},
			Command:       []string{"/bin/sh", "-c", name},
			Env:           []corev1.EnvVar{{Name: name, Value: "http://db.ns.svc:80/" + name}},
		}
		switch i % 3 {
		case 0:
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		case 1:
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		default:
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)})
		}
	}},
	{name: "containers without limits", rules: []Rule{RuleMemoryNoLimit, RuleNonRootNoUser, RuleNonRootAdminUser}, add: func(pod *corev1.Pod, i int, name string) {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: new(true)}
		c := corev1.Container{Name: name}
		if i%2 == 1 {
			c.SecurityContext = &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{RunAsUserName: new(windowsRootUser)}}
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}},
	{name: "containers of Pod Security restricted", rules: []Rule{RuleRestrictedNonRoot}, restricted: true, add: func(pod *corev1.Pod, _ int, name string) {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, SecurityContext: &corev1.SecurityContext{RunAsNonRoot: new(false)}})
	}},
	{name: "containers to narrow", rules: []Rule{RuleRunAsNonRootUser, RuleMemoryLimitFromRequest, RuleMemoryLimitDefault}, narrowing: true, add: func(pod *corev1.Pod, i int, name string) {
		c := corev1.Container{Name: name, SecurityContext: &corev1.SecurityContext{RunAsNonRoot: new(true)}}
		if i%2 == 0 {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}},
	imageShape("Linux-only images", RuleLinuxOnlyImage, Image{Platforms: []Platform{{OS: "linux", Architecture: "amd64"}}}),
	imageShape("unread images", RuleImageUnread, Image{Err: "registry lookup timed out after 1s"}),
	imageShape("mirrored images", RuleImageMirror, Image{Platforms: []Platform{windowsAt("10.0.20348.1")}, Mirror: "mirror.internal", MirrorFor: "mcr.microsoft.com"}),
	imageShape("images of a newer revision", RuleImageNewerRevision, Image{Platforms: []Platform{windowsAt("10.0.20348.9")}}),
	{name: "images not on the pinned build", rules: []Rule{RuleImageNotOnBuild}, cluster: true,
		images: true, add: func(pod *corev1.Pod, i int, name string) {
			pod.Spec.NodeSelector = map[string]string{corev1.LabelWindowsBuild: "10.0.17763"}
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Image: name + "/" + strconv.Itoa(i)})
		}, image: Image{Platforms: []Platform{windowsAt("10.0.20348.1")}}},
	{name: "volumes", rules: []Rule{RuleMemoryEmptyDir, RuleSecretOnDisk, RuleVolumeFileMode, RuleUnmountableVolume,
		RuleLinuxHostPath, RuleLinuxRuntimeHostPath, RuleHostPathBlockDevice, RuleHostPathSocketOrCharDevice}, add: func(pod *corev1.Pod, i int, name string) {
		var src corev1.VolumeSource
		switch i % 6 {
		case 0:
			src.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		case 1:
			src.Secret = &corev1.SecretVolumeSource{SecretName: name, DefaultMode: new(int32(0o400))}
		case 2:
			src.NFS = &corev1.NFSVolumeSource{Server: name, Path: name}
		case 3:
			src.HostPath = &corev1.HostPathVolumeSource{Path: "/proc/" + name, Type: ptrTo(corev1.HostPathBlockDev)}
		case 4:
			src.HostPath = &corev1.HostPathVolumeSource{Path: "/run/" + name, Type: ptrTo(corev1.HostPathSocket)}
		default:
			src.Projected = &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: []corev1.KeyToPath{{Key: name, Path: name, Mode: new(int32(0o400))}}}}}}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: src})
	}},
	// The reproduction of issue 40: one volume of a long name, and its items.
	{name: "items of one volume", rules: []Rule{RuleVolumeFileMode}, add: func(pod *corev1.Pod, _ int, name string) {
		if len(pod.Spec.Volumes) == 0 {
			pod.Spec.Volumes = []corev1.Volume{{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
		}
		s := pod.Spec.Volumes[0].Secret
		s.Items = append(s.Items, corev1.KeyToPath{Key: name, Path: "p", Mode: new(int32(0o400))})
	}},
	{name: "annotations", rules: []Rule{RuleDeprecatedAnnotation}, add: func(pod *corev1.Pod, i int, name string) {
		pod.Annotations[annotationAppArmorPrefix+name+strconv.Itoa(i)] = "runtime/default"
	}},
	{name: "affinity terms", rules: []Rule{RuleWindowsNodeSelector, RuleBuild}, cluster: true, images: true,
		image: Image{Platforms: []Platform{windowsAt("10.0.17763.1"), windowsAt("10.0.20348.1")}}, add: func(pod *corev1.Pod, i int, name string) {
			if len(pod.Spec.Containers) == 0 {
				pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "multi"}}
			}
			na := &pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			*na = append(*na, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: name, Operator: corev1.NodeSelectorOpExists}}})
		}},
}

// constantRules are the rules whose changes do not grow with the object: one per pod, or per policy
// setting.
var constantRules = []Rule{
	RuleWindowsOS, RuleRestrictedUser, RuleDNSPolicy, RuleHostNetwork, RuleInjectorOptOuts, RuleWindowsTolerations,
	RuleArch, RuleRuntimeClass, RuleLinuxByDefault, RuleBuildRequestIgnored, RuleUnknownBuild, RuleAffinityAllowsNone, RuleHyperV, RuleBuildGate,
}

// Every rule is either measured by a shape or said to be constant, so that a new row of any table
// needs its worst shape here.
func TestEveryRuleHasABoundedShape(t *testing.T) {
	covered := slices.Clone(constantRules)
	for _, s := range boundedShapes {
		covered = append(covered, s.rules...)
	}
	for _, f := range LinuxOnlyFields() {
		covered = append(covered, f.Rule())
	}
	for code := range rulesByCode {
		if !slices.Contains(covered, code) {
			t.Errorf("rule %s has no shape in boundedShapes and is not in constantRules", code)
		}
	}
}

// TestDecisionAllocationIsBounded: for every row of every table, a decision on its worst shape
// allocates at most maxDecisionFactor times the object's size, keeps every path, reason and value
// small, and records at most maxFindingsPerRow warnings of one rule.
func TestDecisionAllocationIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pods of a mebibyte")
	}
	const size = 1 << 20
	for _, s := range boundedShapes {
		for _, nameLen := range []int{64 << 10, 1} {
			t.Run(s.name+"/name "+strconv.Itoa(nameLen), func(t *testing.T) {
				name := strings.Repeat("n", nameLen)
				pod := boundedPod()
				empty := podJSONSize(t, pod)
				s.add(pod, 0, name)
				each := max(podJSONSize(t, pod)-empty, 1)
				for i := 1; i < size/each; i++ {
					s.add(pod, i, name)
				}
				checkDecisionBounded(t, s, pod)
			})
		}
	}
}

// The first element of the items shape alone: issue 40's reproduction, a volume name of 200 KB and
// 20,000 items with a mode, which made one decision allocate past 1.4 GB.
func TestIssue40ReproductionIsBounded(t *testing.T) {
	pod := boundedPod()
	name := strings.Repeat("v", 200_000)
	items := make([]corev1.KeyToPath, 20000)
	for i := range items {
		items[i] = corev1.KeyToPath{Key: "k" + strconv.Itoa(i), Path: "p" + strconv.Itoa(i), Mode: new(int32(0o400))}
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", Items: items}}}}
	checkDecisionBounded(t, boundedShape{name: "issue 40", rules: []Rule{RuleVolumeFileMode}}, pod)
}

func boundedPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "demo", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}},
	}
}

func podJSONSize(t *testing.T, pod *corev1.Pod) int {
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func checkDecisionBounded(t *testing.T, s boundedShape, pod *corev1.Pod) {
	t.Helper()
	size := podJSONSize(t, pod)
	pol := Default()
	if s.narrowing {
		pol = withNarrowing(pol)
	}
	facts := Facts{Operation: Create, Version: "v", Namespace: Namespace{Name: "demo", Labels: map[string]string{LabelEnabled: "true"}}}
	if s.restricted {
		facts.Namespace.Labels[labelPodSecurityEnforce] = "restricted"
	}
	if s.cluster {
		facts.Cluster = &Cluster{Builds: []string{"10.0.17763", "10.0.20348"}, Revisions: map[string]int{"10.0.17763": 1, "10.0.20348": 1}}
	}
	if s.images {
		facts.Images = map[string]Image{}
		for _, c := range pod.Spec.Containers {
			facts.Images[c.Image] = s.image
		}
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := pol.Decide(pod, facts)
	warnings := d.Warnings()
	record := d.ChangesJSON()
	runtime.ReadMemStats(&after)
	if err != nil || !d.Windows {
		t.Fatalf("not decided as Windows: %v %+v", err, d.Skipped)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of pod, %d changes, %d warnings, record %d bytes: %d bytes allocated (%.1f per byte)",
		size, len(d.Changes), len(warnings), len(record), allocated, float64(allocated)/float64(size))
	if allocated > uint64(maxDecisionFactor*size) {
		t.Errorf("the decision allocated %d bytes for a pod of %d, more than %d times", allocated, size, maxDecisionFactor)
	}

	checkKeptBounded(t, d)
	fired := map[Rule]int{}
	for _, c := range d.Changes {
		fired[c.Rule]++
	}
	for _, w := range warnings {
		if len(w) > maxBoundedWarning {
			t.Fatalf("a warning of %d bytes: %.120s", len(w), w)
		}
	}
	for _, r := range s.rules {
		if fired[r] == 0 {
			t.Errorf("the shape does not exercise rule %s", r)
		}
	}
}

// checkKeptBounded fails when a change keeps more of the object's strings than record_bounds.go allows,
// or a rule warned more than maxFindingsPerRow times.
func checkKeptBounded(t *testing.T, d Decision) {
	t.Helper()
	warned := map[Rule]int{}
	for _, c := range d.Changes {
		if c.Action == Warn {
			if warned[c.Rule]++; warned[c.Rule] > maxFindingsPerRow {
				t.Fatalf("rule %s warned more than %d times", c.Rule, maxFindingsPerRow)
			}
			if len(c.From)+len(c.To) > maxBoundedValue {
				t.Fatalf("rule %s: a value of %d bytes: %.120s", c.Rule, len(c.From)+len(c.To), c.From)
			}
		}
		if len(c.Path) > maxBoundedPath {
			t.Fatalf("rule %s: a path of %d bytes: %.120s", c.Rule, len(c.Path), c.Path)
		}
		if len(c.Reason) > maxBoundedReason {
			t.Fatalf("rule %s: a reason of %d bytes: %.120s", c.Rule, len(c.Reason), c.Reason)
		}
	}
}

// The bounds of what one change keeps: a path holds a few names and a fixed field, a reason one of the
// pod's strings (escaped for JSON at most 6 times over) and the policy's own text; a warning's value,
// one recorded string.
const (
	maxBoundedPath    = 3*(maxNameBytes+4) + 128
	maxBoundedReason  = 6*maxNameBytes + 2048
	maxBoundedValue   = 6*maxRecordedBytes + 16
	maxBoundedWarning = 4096
)
