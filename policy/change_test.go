package policy

import "testing"

func TestChangeField(t *testing.T) {
	for path, want := range map[string]string{
		"spec.containers[app].securityContext.runAsUser":             "spec.containers[*].securityContext.runAsUser",
		"spec.containers[a[b]].volumeMounts[C:\\x].mountPropagation": "spec.containers[*].volumeMounts[*].mountPropagation",
		"spec.nodeSelector[node.kubernetes.io/windows-build]":        "spec.nodeSelector[node.kubernetes.io/windows-build]",
		"metadata.annotations[container.apparmor.security.beta/app]": "metadata.annotations[*]",
		"spec.hostPID": "spec.hostPID",
	} {
		if got := (Change{Path: path}).Field(); got != want {
			t.Errorf("Field(%q) = %q, want %q", path, got, want)
		}
	}
}
