package property

// The generator of TestValidationProperty: seeded, random Windows pods and workloads that carry random
// combinations of every row of wincompat's strip table (read from policy.LinuxOnlyFields, so a new row
// fails the test until the generator knows how to set it), the rewrites (policy/rewrite.go), and the ordinary
// fields charts carry. Apart from the Linux-only fields, every object is valid for a Windows pod: what
// the API server rejects after wincompat is wincompat's failure, not the generator's.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/policy"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// propKinds are the kinds generated, with their weights: Pods get the whole pod pipeline, the workload
// kinds the template one.
var propKinds = []struct {
	kind   string
	weight int
}{
	{"Pod", 40}, {"Deployment", 10}, {"StatefulSet", 8}, {"DaemonSet", 8}, {"Job", 8}, {"CronJob", 8},
	{"ReplicaSet", 8}, {"ReplicationController", 5}, {"PodTemplate", 5},
}

// propObject is one generated input.
type propObject struct {
	index int
	kind  string
	// restricted: created in the namespace that enforces Pod Security restricted, so generated without
	// what restricted forbids even after wincompat (hostPath, hostNetwork, hostProcess).
	restricted bool
	obj        *unstructured.Unstructured // the input as sent; never modified
}

func (o *propObject) String() string {
	return fmt.Sprintf("#%d %s %s/%s", o.index, o.kind, o.obj.GetNamespace(), o.obj.GetName())
}

// gen generates one object from its own random source, so that object i is the same for a seed however
// many objects are generated or which of them are run.
type gen struct {
	r       *rand.Rand
	density float64 // probability of each strip-table field
	rows    []policy.LinuxOnlyField
	ports   int // pod-wide port counter: unique containerPorts (hostNetwork defaults hostPort to them)
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) intn(n int) int { return g.r.IntN(n) }

func oneOf[T any](g *gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// stripPlan holds the strip-table values chosen for one pod spec, set into its JSON after the typed
// parts are rendered: spec fields, spec.securityContext fields, and per container name.
type stripPlan struct {
	spec       map[string]any
	podSC      map[string]any
	containers map[string]map[string]any
}

// generateObject builds object index of the run with seed.
func generateObject(seed uint64, index int, ns, restrictedNS string, rows []policy.LinuxOnlyField) (*propObject, error) {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(index))), rows: rows}
	// How Linux-heavy the object is: some carry nothing wincompat must strip, a few carry every row.
	switch x := g.r.Float64(); {
	case x < 0.08:
		g.density = 0
	case x < 0.45:
		g.density = 0.1
	case x < 0.85:
		g.density = 0.35
	case x < 0.95:
		g.density = 0.75
	default:
		g.density = 1
	}
	total := 0
	for _, k := range propKinds {
		total += k.weight
	}
	kind, x := "", g.intn(total)
	for _, k := range propKinds {
		if x < k.weight {
			kind = k.kind
			break
		}
		x -= k.weight
	}
	o := &propObject{index: index, kind: kind, restricted: g.chance(0.25)}
	name := fmt.Sprintf("%s-%05d", strings.ToLower(kind), index)
	namespace := ns
	if o.restricted {
		namespace = restrictedNS
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: g.labels(name), Annotations: g.userAnnotations()}

	var typed any
	var plan stripPlan
	switch kind {
	case "Pod":
		restart := oneOf(g, corev1.RestartPolicy(""), corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
		var tpl corev1.PodTemplateSpec
		tpl, plan = g.template(name, restart, o.restricted)
		meta.Labels, meta.Annotations = merge(meta.Labels, tpl.Labels), merge(meta.Annotations, tpl.Annotations)
		typed = &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta, Spec: tpl.Spec}
	default:
		typed, plan = g.workload(kind, meta, o.restricted)
	}
	raw, err := json.Marshal(typed)
	if err != nil {
		return nil, err
	}
	o.obj = &unstructured.Unstructured{}
	if err := o.obj.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	spec, err := jsonMap(o.obj.Object, e2eutil.PodSpecPath(kind)...)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", o, err)
	}
	plan.apply(spec)
	return o, nil
}

func merge(a, b map[string]string) map[string]string {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// workload wraps a template in one of the workload kinds.
func (g *gen) workload(kind string, meta metav1.ObjectMeta, restricted bool) (any, stripPlan) {
	restart := corev1.RestartPolicyAlways
	if kind == "Job" || kind == "CronJob" {
		restart = oneOf(g, corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure)
	} else if g.chance(0.5) {
		restart = "" // defaulted to Always
	}
	tpl, plan := g.template(meta.Name, restart, restricted)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": meta.Name}}
	replicas := ptr.To(int32(1 + g.intn(3)))
	tm := func(group, kind string) metav1.TypeMeta {
		if group == "" {
			return metav1.TypeMeta{APIVersion: "v1", Kind: kind}
		}
		return metav1.TypeMeta{APIVersion: group + "/v1", Kind: kind}
	}
	switch kind {
	case "Deployment":
		d := &appsv1.Deployment{TypeMeta: tm("apps", kind), ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: replicas, Selector: selector, Template: tpl}}
		if g.chance(0.3) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}
		return d, plan
	case "StatefulSet":
		s := &appsv1.StatefulSet{TypeMeta: tm("apps", kind), ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{
			Replicas: replicas, Selector: selector, Template: tpl, ServiceName: meta.Name}}
		if g.chance(0.4) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}}
		}
		if g.chance(0.3) {
			s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		}
		return s, plan
	case "DaemonSet":
		return &appsv1.DaemonSet{TypeMeta: tm("apps", kind), ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: tpl}}, plan
	case "ReplicaSet":
		return &appsv1.ReplicaSet{TypeMeta: tm("apps", kind), ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: replicas, Selector: selector, Template: tpl}}, plan
	case "ReplicationController":
		return &corev1.ReplicationController{TypeMeta: tm("", kind), ObjectMeta: meta, Spec: corev1.ReplicationControllerSpec{
			Replicas: replicas, Selector: map[string]string{"app": meta.Name}, Template: &tpl}}, plan
	case "PodTemplate":
		return &corev1.PodTemplate{TypeMeta: tm("", kind), ObjectMeta: meta, Template: tpl}, plan
	case "Job":
		return &batchv1.Job{TypeMeta: tm("batch", kind), ObjectMeta: meta, Spec: g.jobSpec(tpl)}, plan
	case "CronJob":
		return &batchv1.CronJob{TypeMeta: tm("batch", kind), ObjectMeta: meta, Spec: batchv1.CronJobSpec{
			Schedule:    oneOf(g, "*/5 * * * *", "0 3 * * *", "@hourly"),
			JobTemplate: batchv1.JobTemplateSpec{Spec: g.jobSpec(tpl)},
		}}, plan
	}
	panic("unknown kind " + kind)
}

func (g *gen) jobSpec(tpl corev1.PodTemplateSpec) batchv1.JobSpec {
	s := batchv1.JobSpec{Template: tpl}
	if g.chance(0.5) {
		s.BackoffLimit = ptr.To(int32(g.intn(6)))
	}
	if g.chance(0.3) {
		s.Completions, s.Parallelism = ptr.To(int32(3)), ptr.To(int32(2))
	}
	return s
}

func (g *gen) labels(name string) map[string]string {
	l := map[string]string{"app": name}
	if g.chance(0.5) {
		l["app.kubernetes.io/part-of"] = oneOf(g, "shop", "billing", "monitoring")
	}
	if g.chance(0.3) {
		l["tier"] = oneOf(g, "web", "backend", "batch")
	}
	return l
}

// userAnnotations are the object's own annotations (for a Pod merged with its template's).
func (g *gen) userAnnotations() map[string]string {
	a := map[string]string{}
	if g.chance(0.3) {
		a["example.com/owner"] = oneOf(g, "team-a", "team-b")
	}
	if g.chance(0.2) {
		a["kubectl.kubernetes.io/last-applied-configuration"] = `{"note":"not parsed"}`
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// images: tagged for each catalog build (several spellings), untagged, digest-only.
var (
	propImages2019    = []string{"mcr.microsoft.com/windows/servercore:ltsc2019", "mcr.microsoft.com/windows/nanoserver:1809", "example.com/shop/api:2.1-ltsc2019"}
	propImages2022    = []string{"mcr.microsoft.com/windows/servercore:ltsc2022", "mcr.microsoft.com/windows/servercore:10.0.20348.2031", "mcr.microsoft.com/dotnet/framework/aspnet:4.8-windowsservercore-ltsc2022"}
	propImages2025    = []string{"mcr.microsoft.com/windows/nanoserver:ltsc2025", "example.com/agent:1.0-ltsc2025"}
	propImagesNoBuild = []string{"example.com/shop/web:1.4.2", "registry.example.com:5000/tools/app", "mcr.microsoft.com/windows/nanoserver@sha256:2d1f9c5e4b0ad0c76fbe2f5c0b4e9c4bd6a5cf0f37ab5f3c2b9f6b7b1f4d3a21"}
)

// template builds a pod template (for a Pod: its metadata and spec) and the strip-table values for it.
func (g *gen) template(name string, restart corev1.RestartPolicy, restricted bool) (corev1.PodTemplateSpec, stripPlan) {
	g.ports = 0
	plan := stripPlan{spec: map[string]any{}, podSC: map[string]any{}, containers: map[string]map[string]any{}}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}}
	spec := &tpl.Spec
	spec.OS = &corev1.PodOS{Name: corev1.Windows}
	spec.RestartPolicy = restart

	// HostProcess: the pod or every container says so, and hostNetwork is set, as validation demands.
	hostProcess, hostProcessPerContainer := !restricted && g.chance(0.08), false
	if hostProcess {
		hostProcessPerContainer = g.chance(0.5)
		spec.HostNetwork = true
	} else if !restricted && g.chance(0.06) {
		spec.HostNetwork = true // wincompat warns and leaves it
	}

	images := oneOf(g, propImages2019, propImages2022, propImages2025, propImagesNoBuild, propImagesNoBuild)
	image := func() string {
		if g.chance(0.05) { // containers that disagree on the build
			return oneOf(g, oneOf(g, propImages2019, propImages2022, propImages2025, propImagesNoBuild)...)
		}
		return oneOf(g, images...)
	}

	// Volumes first, so that containers can mount them.
	volumes := g.volumes(restricted)
	spec.Volumes = volumes

	// Pod security context: what Windows keeps, then the Linux-only rows through the plan.
	if g.chance(0.7) || hostProcess {
		sc := &corev1.PodSecurityContext{}
		sc.RunAsNonRoot = oneOf(g, nil, ptr.To(true), ptr.To(false))
		if hostProcess && !hostProcessPerContainer {
			sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}
			if g.chance(0.5) {
				sc.WindowsOptions.RunAsUserName = ptr.To(`NT AUTHORITY\SYSTEM`)
			}
		} else if g.chance(0.25) {
			sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{RunAsUserName: ptr.To(oneOf(g, "ContainerUser", "ContainerAdministrator"))}
			if g.chance(0.2) {
				sc.WindowsOptions.GMSACredentialSpecName = ptr.To("webapp1")
			}
		}
		spec.SecurityContext = sc
	}
	for _, f := range g.rows {
		switch f.Level {
		case policy.PodLevel:
			if v, ok := g.stripValue(f); ok {
				plan.spec[f.Name] = v
			}
		case policy.PodSecurityContextLevel:
			if v, ok := g.stripValue(f); ok {
				plan.podSC[f.Name] = v
			}
		}
	}

	used := map[string]bool{}
	containerName := func(pool ...string) string {
		for {
			n := oneOf(g, pool...)
			if g.chance(0.5) || used[n] {
				n = fmt.Sprintf("%s-%d", n, len(used))
			}
			if !used[n] {
				used[n] = true
				return n
			}
		}
	}
	hp := hostProcess && hostProcessPerContainer
	for range 1 + g.intn(3) {
		c := g.container(containerName("app", "web", "worker", "proxy", "exporter"), image(), volumes, hp, true, &plan)
		spec.Containers = append(spec.Containers, c)
	}
	for range g.intn(3) {
		sidecar := g.chance(0.5)
		c := g.container(containerName("init", "setup", "log-shipper", "mesh"), image(), volumes, hp, sidecar, &plan)
		if sidecar {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		spec.InitContainers = append(spec.InitContainers, c)
	}

	// DNS, scheduling and the rest of the pod.
	switch x := g.r.Float64(); {
	case x < 0.15:
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	case x < 0.25:
		spec.DNSPolicy = corev1.DNSDefault
	case x < 0.35:
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if g.chance(0.35) {
		spec.NodeSelector = map[string]string{}
		if g.chance(0.6) {
			spec.NodeSelector[corev1.LabelOSStable] = oneOf(g, "windows", "windows", "linux")
		}
		if g.chance(0.3) {
			spec.NodeSelector[corev1.LabelWindowsBuild] = oneOf(g, "10.0.17763", "10.0.20348", "10.0.26100")
		}
		if g.chance(0.4) {
			spec.NodeSelector["disktype"] = "ssd"
		}
	}
	if g.chance(0.3) {
		for _, tol := range []corev1.Toleration{
			e2eutil.WindowsToleration,
			{Operator: corev1.TolerationOpExists},
			{Key: "os", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "windows-gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "os", Operator: corev1.TolerationOpEqual, Value: "Windows", Effect: corev1.TaintEffectNoSchedule},
		} {
			if g.chance(0.3) {
				spec.Tolerations = append(spec.Tolerations, tol)
			}
		}
	}
	if g.chance(0.1) {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
			}}},
		}}}
	}
	if g.chance(0.1) {
		// A catalog class wincompat keeps. The RuntimeClass admission plugin rejects a pod whose
		// nodeSelector contradicts the class before any webhook runs, so no chart would ship one.
		rc := oneOf(g, "windows-2019", "windows-2022")
		spec.RuntimeClassName = ptr.To(rc)
		if spec.NodeSelector[corev1.LabelOSStable] == "linux" {
			delete(spec.NodeSelector, corev1.LabelOSStable)
		}
		if b, set := spec.NodeSelector[corev1.LabelWindowsBuild]; set && b != e2eutil.WindowsBuilds[rc] {
			delete(spec.NodeSelector, corev1.LabelWindowsBuild)
		}
	}
	if g.chance(0.3) {
		spec.TerminationGracePeriodSeconds = ptr.To(int64(oneOf(g, 0, 10, 60)))
	}
	spec.AutomountServiceAccountToken = oneOf(g, nil, ptr.To(false), ptr.To(true))
	if g.chance(0.15) {
		spec.PriorityClassName = "system-node-critical"
	}

	// Template annotations: a build pin, deprecated Linux security annotations, ordinary ones.
	a := map[string]string{}
	if g.chance(0.1) {
		a[policy.AnnotationBuild] = oneOf(g, "ltsc2019", "2022", "10.0.26100", "ltsc2030")
	}
	if g.chance(0.12) {
		a["seccomp.security.alpha.kubernetes.io/pod"] = "runtime/default"
	}
	if g.chance(0.12) {
		a["container.seccomp.security.alpha.kubernetes.io/"+spec.Containers[0].Name] = "runtime/default"
	}
	if g.chance(0.12) {
		a["container.apparmor.security.beta.kubernetes.io/"+spec.Containers[0].Name] = "runtime/default"
	}
	if g.chance(0.3) {
		a["prometheus.io/scrape"] = "true"
	}
	if len(a) > 0 {
		tpl.Annotations = a
	}
	return tpl, plan
}

// volumes returns 0-5 volumes of the kinds charts use; restricted pods get none that restricted forbids.
func (g *gen) volumes(restricted bool) []corev1.Volume {
	var out []corev1.Volume
	for i := range g.intn(6) {
		name := fmt.Sprintf("vol-%d", i)
		var src corev1.VolumeSource
		switch x := g.intn(8); x {
		case 0, 1: // the rewrite
			ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
			if g.chance(0.5) {
				ed.SizeLimit = ptr.To(resource.MustParse(oneOf(g, "64Mi", "1Gi")))
			}
			src.EmptyDir = ed
		case 2:
			ed := &corev1.EmptyDirVolumeSource{}
			if g.chance(0.3) {
				ed.SizeLimit = ptr.To(resource.MustParse("500Mi"))
			}
			src.EmptyDir = ed
		case 3:
			cm := &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}
			if g.chance(0.4) {
				cm.Items = []corev1.KeyToPath{{Key: "app.conf", Path: "app.conf"}}
			}
			if g.chance(0.3) {
				cm.DefaultMode = ptr.To(int32(0o444))
			}
			if g.chance(0.3) {
				cm.Optional = ptr.To(true)
			}
			src.ConfigMap = cm
		case 4:
			src.Secret = &corev1.SecretVolumeSource{SecretName: "tls", Optional: oneOf(g, nil, ptr.To(true))}
		case 5:
			p := &corev1.ProjectedVolumeSource{}
			if g.chance(0.7) {
				p.Sources = append(p.Sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}})
			}
			if g.chance(0.5) {
				p.Sources = append(p.Sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}})
			}
			if g.chance(0.5) {
				p.Sources = append(p.Sources, corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				}}})
			}
			if len(p.Sources) == 0 || g.chance(0.3) {
				p.Sources = append(p.Sources, corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Path: "token", Audience: "vault", ExpirationSeconds: ptr.To(int64(3600))}})
			}
			src.Projected = p
		case 6:
			if restricted {
				src.EmptyDir = &corev1.EmptyDirVolumeSource{}
				break
			}
			src.HostPath = &corev1.HostPathVolumeSource{Path: oneOf(g, `C:\var\log`, `C:\ProgramData\docker`, "/var/log")}
			if g.chance(0.5) {
				src.HostPath.Type = ptr.To(oneOf(g, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory))
			}
		case 7: // a raw block device (wincompat warns and leaves it)
			src.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "block"}
		}
		out = append(out, corev1.Volume{Name: name, VolumeSource: src})
	}
	return out
}

// container builds one container; probes only where validation allows them (containers, sidecars).
func (g *gen) container(name, image string, volumes []corev1.Volume, hostProcess, probes bool, plan *stripPlan) corev1.Container {
	c := corev1.Container{Name: name, Image: image}
	if g.chance(0.4) {
		c.Command = []string{"cmd.exe", "/c"}
		c.Args = []string{oneOf(g, "ping -t localhost", "echo ready && timeout /t -1")}
	}
	if g.chance(0.2) {
		c.ImagePullPolicy = oneOf(g, corev1.PullAlways, corev1.PullIfNotPresent)
	}
	if g.chance(0.15) {
		c.WorkingDir = `C:\app`
	}
	for range g.intn(3) {
		g.ports++
		p := corev1.ContainerPort{ContainerPort: int32(8000 + g.ports), Protocol: oneOf(g, corev1.ProtocolTCP, corev1.ProtocolTCP, corev1.ProtocolUDP)}
		if g.chance(0.5) {
			p.Name = fmt.Sprintf("port-%d", g.ports)
		}
		c.Ports = append(c.Ports, p)
	}
	for i := range g.intn(4) {
		e := corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", i)}
		switch g.intn(4) {
		case 0:
			e.ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
		case 1:
			e.ValueFrom = &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}, Key: "level"}}
		case 2:
			e.ValueFrom = &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}, Key: "password", Optional: ptr.To(true)}}
		default:
			e.Value = oneOf(g, "1", "info", `C:\data`, "")
		}
		c.Env = append(c.Env, e)
	}
	if g.chance(0.15) {
		c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}}}
	}
	if probes {
		probe := func() *corev1.Probe {
			p := &corev1.Probe{PeriodSeconds: int32(5 + g.intn(20))}
			switch g.intn(3) {
			case 0:
				p.HTTPGet = &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(8080 + g.intn(10)))}
			case 1:
				p.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}
			default:
				p.Exec = &corev1.ExecAction{Command: []string{"cmd.exe", "/c", "exit 0"}}
			}
			return p
		}
		if g.chance(0.35) {
			c.LivenessProbe = probe()
		}
		if g.chance(0.35) {
			c.ReadinessProbe = probe()
		}
		if g.chance(0.15) {
			c.StartupProbe = probe()
		}
	}
	c.Resources = g.resources()

	// Security context: the Linux-only rows through the plan, the Windows ones typed.
	rows := map[string]any{}
	for _, f := range g.rows {
		if f.Level != policy.ContainerSecurityContextLevel {
			continue
		}
		if v, ok := g.stripValue(f); ok {
			rows[f.Name] = v
		}
	}
	if len(rows) > 0 {
		plan.containers[name] = rows
	}
	if g.chance(0.5) || hostProcess {
		sc := &corev1.SecurityContext{RunAsNonRoot: oneOf(g, nil, ptr.To(true), ptr.To(false))}
		if hostProcess {
			sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}
		} else if g.chance(0.2) {
			sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{RunAsUserName: ptr.To(oneOf(g, "ContainerUser", "ContainerAdministrator"))}
		}
		c.SecurityContext = sc
	}

	privileged := rows["privileged"] == true
	mountPaths := map[string]bool{}
	for _, v := range volumes {
		if v.PersistentVolumeClaim != nil {
			if g.chance(0.5) {
				c.VolumeDevices = append(c.VolumeDevices, corev1.VolumeDevice{Name: v.Name, DevicePath: "/dev/xvd" + v.Name[len(v.Name)-1:]})
			}
			continue
		}
		if !g.chance(0.6) {
			continue
		}
		m := corev1.VolumeMount{Name: v.Name}
		m.MountPath = oneOf(g, `C:\mnt\`+v.Name, "/mnt/"+v.Name, `C:\etc\app.d\`+v.Name, "/etc/app.d/"+v.Name)
		if mountPaths[m.MountPath] {
			continue
		}
		mountPaths[m.MountPath] = true
		if g.chance(0.3) {
			m.ReadOnly = true
		}
		if g.chance(0.15) && v.EmptyDir != nil {
			m.SubPath = "sub"
		}
		if g.chance(0.25) {
			modes := []corev1.MountPropagationMode{corev1.MountPropagationNone, corev1.MountPropagationHostToContainer}
			if privileged {
				// The API server allows Bidirectional only on privileged containers.
				modes = append(modes, corev1.MountPropagationBidirectional)
			}
			m.MountPropagation = ptr.To(oneOf(g, modes...))
		}
		c.VolumeMounts = append(c.VolumeMounts, m)
	}
	return c
}

// resources: cpu and memory with limits at least the requests, and sometimes huge pages, which need
// a cpu or memory request beside them and requests equal to limits.
func (g *gen) resources() corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	if !g.chance(0.6) {
		return r
	}
	cpu := oneOf(g, "100m", "250m", "500m", "1")
	mem := oneOf(g, "64Mi", "128Mi", "256Mi", "1Gi")
	r.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	if g.chance(0.6) {
		r.Limits = r.Requests.DeepCopy()
		if g.chance(0.5) {
			r.Limits[corev1.ResourceCPU] = resource.MustParse("2")
		}
	}
	if g.chance(0.2) {
		name := corev1.ResourceName(oneOf(g, "hugepages-2Mi", "hugepages-1Gi"))
		q := resource.MustParse(map[corev1.ResourceName]string{"hugepages-2Mi": "4Mi", "hugepages-1Gi": "1Gi"}[name])
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits[name] = q
		if g.chance(0.6) { // otherwise the API server defaults the request to the limit
			r.Requests[name] = q
		}
	}
	return r
}

// stripValue picks a value for one strip-table row, or false to leave it unset. Every row of
// policy.LinuxOnlyFields must have a case here: TestValidationProperty fails on a row it cannot set.
func (g *gen) stripValue(f policy.LinuxOnlyField) (any, bool) {
	if !g.chance(g.density) {
		return nil, false
	}
	v, ok := stripValueFor(g, f)
	if !ok {
		panic(unknownRow{f})
	}
	return v, true
}

// unknownRow is a strip-table row the generator cannot set.
type unknownRow struct{ f policy.LinuxOnlyField }

func stripValueFor(g *gen, f policy.LinuxOnlyField) (any, bool) {
	ids := func() any { return int64(oneOf(g, 0, 1000, 1001, 65534, 2000)) }
	switch f.RejectedIf {
	case policy.WhenTrue:
		// false is accepted (and omitted when serialized): mostly the value that needs stripping.
		return g.chance(0.85), true
	}
	switch f.Name {
	case "shareProcessNamespace", "hostUsers", "readOnlyRootFilesystem", "privileged", "allowPrivilegeEscalation":
		return g.chance(0.5), true
	case "resources":
		r := map[string]any{}
		if g.chance(0.7) {
			r["requests"] = map[string]any{"cpu": oneOf(g, "500m", "1"), "memory": oneOf(g, "256Mi", "1Gi")}
		}
		if len(r) == 0 || g.chance(0.6) {
			r["limits"] = map[string]any{"cpu": "2", "memory": "2Gi"}
		}
		return r, true
	case "seLinuxOptions":
		return oneOf[any](g,
			map[string]any{"level": "s0:c123,c456"},
			map[string]any{"user": "system_u", "role": "system_r", "type": "spc_t"}), true
	case "seccompProfile":
		return oneOf[any](g,
			map[string]any{"type": "RuntimeDefault"},
			map[string]any{"type": "Unconfined"},
			map[string]any{"type": "Localhost", "localhostProfile": "profiles/audit.json"}), true
	case "appArmorProfile":
		return oneOf[any](g,
			map[string]any{"type": "RuntimeDefault"},
			map[string]any{"type": "Unconfined"},
			map[string]any{"type": "Localhost", "localhostProfile": "k8s-apparmor-example"}), true
	case "fsGroup", "runAsUser", "runAsGroup":
		return ids(), true
	case "fsGroupChangePolicy":
		return oneOf(g, "OnRootMismatch", "Always"), true
	case "supplementalGroups":
		groups := []any{}
		if g.chance(0.1) {
			return groups, true // rejected too, though the list is empty
		}
		for range g.intn(3) + 1 {
			groups = append(groups, ids())
		}
		return groups, true
	case "supplementalGroupsPolicy":
		return oneOf(g, "Merge", "Strict"), true
	case "seLinuxChangePolicy":
		return oneOf(g, "MountOption", "Recursive"), true
	case "sysctls":
		s := []any{map[string]any{"name": "net.core.somaxconn", "value": "1024"}}
		if g.chance(0.3) {
			s = append(s, map[string]any{"name": "kernel.shm_rmid_forced", "value": "0"})
		}
		return s, true
	case "capabilities":
		return oneOf[any](g,
			map[string]any{"drop": []any{"ALL"}},
			map[string]any{"add": []any{"NET_BIND_SERVICE"}, "drop": []any{"ALL"}},
			map[string]any{"add": []any{"SYS_ADMIN", "NET_ADMIN"}},
			map[string]any{}), true
	case "procMount":
		return oneOf(g, "Default", "Unmasked"), true
	}
	return nil, false
}

// apply sets the planned strip-table values into a pod spec's JSON.
func (p stripPlan) apply(spec map[string]any) {
	for k, v := range p.spec {
		spec[k] = v
	}
	if len(p.podSC) > 0 {
		sc, _ := spec["securityContext"].(map[string]any)
		if sc == nil {
			sc = map[string]any{}
			spec["securityContext"] = sc
		}
		for k, v := range p.podSC {
			sc[k] = v
		}
	}
	for _, list := range []string{"initContainers", "containers"} {
		items, _ := spec[list].([]any)
		for _, item := range items {
			c := item.(map[string]any)
			rows := p.containers[c["name"].(string)]
			if len(rows) == 0 {
				continue
			}
			sc, _ := c["securityContext"].(map[string]any)
			if sc == nil {
				sc = map[string]any{}
				c["securityContext"] = sc
			}
			for k, v := range rows {
				sc[k] = v
			}
		}
	}
}

// jsonMap returns the map at path inside obj, without copying (unstructured.NestedMap copies).
func jsonMap(obj map[string]any, path ...string) (map[string]any, error) {
	cur := obj
	for i, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no object at %s", strings.Join(path[:i+1], "."))
		}
		cur = next
	}
	return cur, nil
}

// TestPropertyGeneratorReplays: object i depends only on the seed and i, so a failure of a large run
// replays alone (WINCOMPAT_PROPERTY_ONLY); and every object declares Windows. No cluster needed.
func TestPropertyGeneratorReplays(t *testing.T) {
	rows := policy.LinuxOnlyFields()
	for _, seed := range []uint64{1, 20260401} {
		for i := range 300 {
			a, err := generateChecked(seed, i, rows)
			if err != nil {
				t.Fatal(err)
			}
			b, err := generateChecked(seed, i, rows)
			if err != nil {
				t.Fatal(err)
			}
			if asJSON(a.obj.Object) != asJSON(b.obj.Object) || a.kind != b.kind || a.restricted != b.restricted {
				t.Fatalf("seed %d object %d differs between two generations:\n%s\n%s", seed, i, asJSON(a.obj.Object), asJSON(b.obj.Object))
			}
			if os, _, _ := unstructured.NestedString(a.obj.Object, append(e2eutil.PodSpecPath(a.kind), "os", "name")...); os != "windows" {
				t.Errorf("%v: spec.os.name = %q", a, os)
			}
		}
	}
}
