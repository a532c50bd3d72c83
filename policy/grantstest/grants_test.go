package grantstest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func base() *corev1.PodSpec {
	return &corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true)},
		InitContainers:  []corev1.Container{{Name: "init"}},
		Containers: []corev1.Container{{Name: "app", SecurityContext: &corev1.SecurityContext{
			Privileged: new(false), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
			WindowsOptions: &corev1.WindowsSecurityContextOptions{RunAsUserName: new("ContainerUser")},
		}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}},
	}
}

func sc(c *corev1.Container) *corev1.SecurityContext {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	return c.SecurityContext
}

func ephemeral(s *corev1.PodSpec) *corev1.SecurityContext {
	c := corev1.Container(s.EphemeralContainers[0].EphemeralContainerCommon)
	out := sc(&c)
	s.EphemeralContainers[0].EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
	return out
}

// Every widening the invariant names is caught, in every kind of container: the fuzz tests that rely on
// Widened would otherwise pass vacuously.
func TestWidenedCatchesEveryGrant(t *testing.T) {
	for name, widen := range map[string]func(*corev1.PodSpec){
		"hostNetwork": func(s *corev1.PodSpec) { s.HostNetwork = true },
		"hostPID":     func(s *corev1.PodSpec) { s.HostPID = true },
		"hostIPC":     func(s *corev1.PodSpec) { s.HostIPC = true },
		"pod hostProcess": func(s *corev1.PodSpec) {
			s.SecurityContext.WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: new(true)}
		},
		"containers[0] privileged":               func(s *corev1.PodSpec) { sc(&s.Containers[0]).Privileged = new(true) },
		"initContainers[0] privileged":           func(s *corev1.PodSpec) { sc(&s.InitContainers[0]).Privileged = new(true) },
		"ephemeralContainers[0] privileged":      func(s *corev1.PodSpec) { ephemeral(s).Privileged = new(true) },
		"containers[0] allowPrivilegeEscalation": func(s *corev1.PodSpec) { sc(&s.Containers[0]).AllowPrivilegeEscalation = new(true) },
		"containers[0] capability SYS_ADMIN": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.Capabilities.Add = append(s.Containers[0].SecurityContext.Capabilities.Add, "SYS_ADMIN")
		},
		"ephemeralContainers[0] capability NET_RAW": func(s *corev1.PodSpec) {
			ephemeral(s).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW"}}
		},
		"initContainers[0] procMount Unmasked": func(s *corev1.PodSpec) { sc(&s.InitContainers[0]).ProcMount = new(corev1.UnmaskedProcMount) },
		"containers[0] hostProcess": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.WindowsOptions.HostProcess = new(true)
		},
		"pod lost runAsNonRoot=true": func(s *corev1.PodSpec) { s.SecurityContext.RunAsNonRoot = nil },
		"containers[0] lost runAsNonRoot=true": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.RunAsNonRoot = new(false)
		},
		"containers[0] runs as ContainerAdministrator": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.WindowsOptions.RunAsUserName = new("ContainerAdministrator")
		},
		"containers[0] runs as the image's default user": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.WindowsOptions.RunAsUserName = nil
		},
		"initContainers[0] has a different GMSA": func(s *corev1.PodSpec) {
			sc(&s.InitContainers[0]).WindowsOptions = &corev1.WindowsSecurityContextOptions{GMSACredentialSpecName: new("domain")}
		},
		"containers[1] privileged": func(s *corev1.PodSpec) {
			s.Containers = append(s.Containers, corev1.Container{Name: "new", SecurityContext: &corev1.SecurityContext{Privileged: new(true)}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			after := base()
			widen(after)
			got := Widened(base(), after)
			if len(got) == 0 {
				t.Fatal("not caught")
			}
			if !strings.Contains(strings.Join(got, "; "), name) {
				t.Errorf("caught as %q, want a line naming %q", got, name)
			}
		})
	}
}

// What wincompat does to a Windows pod narrows or keeps what it may do, and must not be reported.
func TestWidenedAcceptsNarrowing(t *testing.T) {
	for name, narrow := range map[string]func(*corev1.PodSpec){
		"nothing":            func(*corev1.PodSpec) {},
		"strip privileged":   func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Privileged = nil },
		"strip capabilities": func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Capabilities = nil },
		"set runAsNonRoot":   func(s *corev1.PodSpec) { sc(&s.InitContainers[0]).RunAsNonRoot = new(true) },
		"name a user where none": func(s *corev1.PodSpec) {
			s.SecurityContext.WindowsOptions = &corev1.WindowsSecurityContextOptions{RunAsUserName: new("ContainerUser")}
		},
	} {
		t.Run(name, func(t *testing.T) {
			after := base()
			narrow(after)
			if got := Widened(base(), after); len(got) > 0 {
				t.Errorf("reported as widening: %q", got)
			}
		})
	}
}
