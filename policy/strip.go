package policy

import (
	corev1 "k8s.io/api/core/v1"
)

// FieldLevel says where a Linux-only field lives: directly under the pod spec, under its
// securityContext, or under every container's. (Policy.Scope is another thing: which namespaces and
// objects wincompat acts on.)
type FieldLevel string

const (
	// PodLevel is a field directly under spec.
	PodLevel FieldLevel = "spec"
	// PodSecurityContextLevel is a field under spec.securityContext.
	PodSecurityContextLevel FieldLevel = "spec.securityContext"
	// ContainerSecurityContextLevel is a field under the securityContext of every container,
	// initContainer and ephemeralContainer.
	ContainerSecurityContextLevel FieldLevel = "containers[*].securityContext"
)

// Rejection says which values of a field the API server rejects on a Windows pod.
type Rejection string

const (
	// WhenSet rejects any value, including false, zero and empty.
	WhenSet Rejection = "set"
	// WhenTrue rejects only true.
	WhenTrue Rejection = "true"
	// WhenNonEmpty rejects a list with at least one item.
	WhenNonEmpty Rejection = "non-empty"
)

// LinuxOnlyField is one row of the strip table: a field that pkg/apis/core/validation (validateWindows,
// validatePodResources) rejects when spec.os.name is windows.
type LinuxOnlyField struct {
	Level      FieldLevel
	Name       string
	RejectedIf Rejection
}

// Path is the field's path for docs and metrics, with "*" for the container name.
func (f LinuxOnlyField) Path() string { return string(f.Level) + "." + f.Name }

// Rule is the code of the row in the rules table: each row of the strip table is a rule of its own.
func (f LinuxOnlyField) Rule() Rule { return Rule("strip:" + f.Path()) }

// take clears one field and returns its old value when the API server would have rejected it.
type take[T any] func(*T) (removed any, ok bool)

type row[T any] struct {
	LinuxOnlyField
	take take[T]
}

// ruledRow is a row with its rule (LinuxOnlyField.Rule), worked out once rather than for every change.
type ruledRow[T any] struct {
	row[T]
	rule Rule
}

func ruled[T any](rows []row[T]) []ruledRow[T] {
	out := make([]ruledRow[T], len(rows))
	for i, r := range rows {
		out[i] = ruledRow[T]{r, r.Rule()}
	}
	return out
}

// ptr clears a pointer field; any non-nil value is rejected.
func ptr[V any](p **V) (any, bool) {
	v := *p
	*p = nil
	if v == nil {
		return nil, false
	}
	return *v, true
}

// The strip table. Verified against kubernetes/kubernetes v1.36.3 and v1.37.2
// pkg/apis/core/validation/validation.go: validateWindows (pod and container securityContext, hostPID,
// hostIPC, hostUsers, shareProcessNamespace; 1.37 reads the four host fields from the internal pod spec
// instead of its security context, with the same paths and the same refusals) and validatePodResources
// (pod-level resources). Kept on purpose: runAsNonRoot, windowsOptions and hostNetwork, which Windows pods
// use.
var (
	podRows = ruled([]row[corev1.PodSpec]{
		{LinuxOnlyField{PodLevel, "hostPID", WhenTrue}, func(s *corev1.PodSpec) (any, bool) {
			v := s.HostPID
			s.HostPID = false
			return v, v
		}},
		{LinuxOnlyField{PodLevel, "hostIPC", WhenTrue}, func(s *corev1.PodSpec) (any, bool) {
			v := s.HostIPC
			s.HostIPC = false
			return v, v
		}},
		{LinuxOnlyField{PodLevel, "shareProcessNamespace", WhenSet}, func(s *corev1.PodSpec) (any, bool) {
			return ptr(&s.ShareProcessNamespace)
		}},
		{LinuxOnlyField{PodLevel, "hostUsers", WhenSet}, func(s *corev1.PodSpec) (any, bool) {
			return ptr(&s.HostUsers)
		}},
		{LinuxOnlyField{PodLevel, "resources", WhenSet}, func(s *corev1.PodSpec) (any, bool) {
			return ptr(&s.Resources)
		}},
	})

	podSecurityContextRows = ruled([]row[corev1.PodSecurityContext]{
		{LinuxOnlyField{PodSecurityContextLevel, "seLinuxOptions", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.SELinuxOptions)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "seccompProfile", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.SeccompProfile)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "appArmorProfile", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.AppArmorProfile)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "fsGroup", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.FSGroup)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "fsGroupChangePolicy", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.FSGroupChangePolicy)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "runAsUser", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.RunAsUser)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "runAsGroup", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.RunAsGroup)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "supplementalGroups", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			// The API server rejects even an empty list, so "set" means non-nil here.
			v := c.SupplementalGroups
			c.SupplementalGroups = nil
			return v, v != nil
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "supplementalGroupsPolicy", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.SupplementalGroupsPolicy)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "seLinuxChangePolicy", WhenSet}, func(c *corev1.PodSecurityContext) (any, bool) {
			return ptr(&c.SELinuxChangePolicy)
		}},
		{LinuxOnlyField{PodSecurityContextLevel, "sysctls", WhenNonEmpty}, func(c *corev1.PodSecurityContext) (any, bool) {
			v := c.Sysctls
			if len(v) == 0 {
				return nil, false
			}
			c.Sysctls = nil
			return v, true
		}},
	})

	containerSecurityContextRows = ruled([]row[corev1.SecurityContext]{
		{LinuxOnlyField{ContainerSecurityContextLevel, "seLinuxOptions", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.SELinuxOptions)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "seccompProfile", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.SeccompProfile)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "appArmorProfile", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.AppArmorProfile)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "capabilities", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.Capabilities)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "readOnlyRootFilesystem", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.ReadOnlyRootFilesystem)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "privileged", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.Privileged)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "allowPrivilegeEscalation", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.AllowPrivilegeEscalation)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "procMount", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.ProcMount)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "runAsUser", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.RunAsUser)
		}},
		{LinuxOnlyField{ContainerSecurityContextLevel, "runAsGroup", WhenSet}, func(c *corev1.SecurityContext) (any, bool) {
			return ptr(&c.RunAsGroup)
		}},
	})
)

// LinuxOnlyFields returns the strip table in the order wincompat applies it. Docs and tests are generated
// from it, so this is the only list of these fields in the project.
func LinuxOnlyFields() []LinuxOnlyField {
	var out []LinuxOnlyField
	for _, r := range podRows {
		out = append(out, r.LinuxOnlyField)
	}
	for _, r := range podSecurityContextRows {
		out = append(out, r.LinuxOnlyField)
	}
	for _, r := range containerSecurityContextRows {
		out = append(out, r.LinuxOnlyField)
	}
	return out
}

// ReasonLinuxOnly is the reason recorded for every strip-table removal.
const ReasonLinuxOnly = "not supported on Windows"

// stripLinuxOnly applies the strip table to a pod spec and records one Change per removed value.
func stripLinuxOnly(spec *corev1.PodSpec, rec *recorder) {
	for _, r := range podRows {
		if v, ok := r.take(spec); ok {
			rec.add(Change{Action: Strip, Path: "spec." + r.Name, From: jsonValue(v), Reason: ReasonLinuxOnly, Rule: r.rule})
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		for _, r := range podSecurityContextRows {
			if v, ok := r.take(sc); ok {
				rec.add(Change{Action: Strip, Path: "spec.securityContext." + r.Name, From: jsonValue(v), Reason: ReasonLinuxOnly, Rule: r.rule})
			}
		}
	}
	var last containerAt // the container whose strips were recorded last
	forEachContainer(spec, func(at containerAt, c *corev1.Container) {
		if c.SecurityContext == nil {
			return
		}
		first := true
		for _, r := range containerSecurityContextRows {
			if v, ok := r.take(c.SecurityContext); ok {
				// Two containers of one name: the record keeps their strips apart, as the admission
				// policies write them.
				split := first && at == last
				rec.add(Change{Action: Strip, Path: at.path(".securityContext." + r.Name), From: jsonValue(v), Reason: ReasonLinuxOnly, Rule: r.rule, split: split})
				first, last = false, at
			}
		}
	})
}

// forEachPlacingContainer visits the init containers and containers with where they are: those that
// take resources and whose images decide where the pod runs (ephemeral containers join a placed pod).
func forEachPlacingContainer(spec *corev1.PodSpec, visit func(at containerAt, c *corev1.Container)) {
	for i := range spec.InitContainers {
		visit(containerAt{"initContainers", spec.InitContainers[i].Name}, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		visit(containerAt{"containers", spec.Containers[i].Name}, &spec.Containers[i])
	}
}

// forEachContainer visits containers, initContainers and ephemeralContainers with where they are.
// Ephemeral containers share the Container fields the table needs through EphemeralContainerCommon,
// whose fields are Container's: visited in place, never copied (a review may carry thousands).
func forEachContainer(spec *corev1.PodSpec, visit func(at containerAt, c *corev1.Container)) {
	for i := range spec.InitContainers {
		visit(containerAt{"initContainers", spec.InitContainers[i].Name}, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		visit(containerAt{"containers", spec.Containers[i].Name}, &spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		visit(containerAt{"ephemeralContainers", ec.Name}, (*corev1.Container)(&ec.EphemeralContainerCommon))
	}
}
