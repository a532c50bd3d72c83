package striptable

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestProbePath(t *testing.T) {
	for goPath, want := range map[string]string{
		"Containers[*].SecurityContext.SELinuxOptions":                                    "spec.containers[*].securityContext.seLinuxOptions",
		"EphemeralContainers[*].EphemeralContainerCommon.SecurityContext.AppArmorProfile": "spec.ephemeralContainers[*].securityContext.appArmorProfile",
		"SecurityContext.FSGroupChangePolicy":                                             "spec.securityContext.fsGroupChangePolicy",
		"SecurityContext.HostUsers":                                                       "spec.hostUsers",
		"HostIPC":                                                                         "spec.hostIPC",
		"OS":                                                                              "spec.os",
		"ShareProcessNamespace":                                                           "spec.shareProcessNamespace",
	} {
		if got := probePath(goPath); got != want {
			t.Errorf("probePath(%q) = %q, want %q", goPath, got, want)
		}
	}
}

// Both spellings upstream has used for the set, and only the OS-specific one is read.
func TestOSSpecificNames(t *testing.T) {
	src := `package validation
func TestValidateOSFields(t *testing.T) {
	osSpecificFields := sets.New[string](
		"HostPID",
		"SecurityContext.RunAsUser",
	)
	osNeutralFields := sets.NewString("Affinity")
	_ = osNeutralFields
}
func TestOther(t *testing.T) { osSpecificFields := sets.NewString("Nope"); _ = osSpecificFields }
`
	file := filepath.Join(t.TempDir(), "validation_test.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := osSpecificNames(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"HostPID", "SecurityContext.RunAsUser"}; !slices.Equal(got, want) {
		t.Errorf("osSpecificNames = %q, want %q", got, want)
	}
	if err := os.WriteFile(file, []byte("package validation\nfunc TestValidateOSFields() {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := osSpecificNames(file); err == nil {
		t.Error("a test without the list must be an error, not an empty cross-check")
	}
}
