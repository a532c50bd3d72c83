package policy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A policy that would make wincompat name an administrator, or write a limit the API server refuses
// or that bounds nothing, is refused with the key's path.
func TestNarrowingKnobsValidate(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"the kubelet's root user", "nonRootUserName: ContainerAdministrator\n", `nonRootUserName: Invalid value: "ContainerAdministrator": an administrator account (the kubelet treats it as root`},
		{"any case", "nonRootUserName: containeradministrator\n", `nonRootUserName: Invalid value: "containeradministrator": an administrator account`},
		{"with a domain", "nonRootUserName: 'User Manager\\ContainerAdministrator'\n", `nonRootUserName: Invalid value: "User Manager\\ContainerAdministrator": an administrator account`},
		{"built-in administrator", "nonRootUserName: Administrator\n", `nonRootUserName: Invalid value: "Administrator": an administrator account`},
		{"system", "nonRootUserName: 'NT AUTHORITY\\SYSTEM'\n", `nonRootUserName: Invalid value: "NT AUTHORITY\\SYSTEM": an administrator account`},
		{"switch without a user", "nonRootUserName: ''\nuserForRunAsNonRoot: true\n", `userForRunAsNonRoot: Invalid value: true: names nonRootUserName, which is empty`},
		{"not a quantity", "memoryLimits: {default: lots}\n", `memoryLimits.default: Invalid value: "lots": not a quantity`},
		{"zero", "memoryLimits: {default: '0'}\n", `memoryLimits.default: Invalid value: "0": a memory limit must be more than zero`},
		{"negative", "memoryLimits: {default: -1Gi}\n", `memoryLimits.default: Invalid value: "-1Gi": a memory limit must be more than zero`},
		{"millibytes", "memoryLimits: {default: 500m}\n", `memoryLimits.default: Invalid value: "500m": not a whole number of bytes`},
		{"unknown nested key", "memoryLimits: {fromRequest: true}\n", `line 3: unknown key "memoryLimits.fromRequest"`},
		{"wrong shape", "memoryLimits: 1Gi\n", `line 3: memoryLimits: got str "1Gi", want a memorylimits with fromRequests and default`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(header + tc.file))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	for _, ok := range []string{
		"nonRootUserName: ContainerUser\nuserForRunAsNonRoot: true\n",
		"nonRootUserName: 'CONTOSO\\svc-web'\n",
		"memoryLimits: {fromRequests: true, default: 512Mi}\n",
		"memoryLimits: {default: 1G}\n",
	} {
		if _, err := Load([]byte(header + ok)); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}

// withNarrowing is pol with the rewrites that narrow turned on, for the fuzz test.
func withNarrowing(pol *Policy) *Policy {
	v := *pol
	v.UserForRunAsNonRoot = v.NonRootUserName != "" // Validate refuses it without a user
	v.MemoryLimits = MemoryLimits{FromRequests: true, Default: "256Mi"}
	return &v
}

// checkMemoryNarrowed fails when a decision touched a memory request, or changed or removed a memory
// limit that was there: memoryLimits only adds limits where there were none. (grantstest.Widened covers
// the users: a user named before is never replaced.)
func checkMemoryNarrowed(t *testing.T, before, after *corev1.PodSpec) {
	t.Helper()
	for _, l := range []struct{ before, after []corev1.Container }{{before.InitContainers, after.InitContainers}, {before.Containers, after.Containers}} {
		for i := range min(len(l.before), len(l.after)) {
			b, a := l.before[i].Resources, l.after[i].Resources
			if !sameQuantity(b.Requests, a.Requests, corev1.ResourceMemory) {
				t.Fatalf("container %s: memory request changed", l.before[i].Name)
			}
			if _, had := b.Limits[corev1.ResourceMemory]; had && !sameQuantity(b.Limits, a.Limits, corev1.ResourceMemory) {
				t.Fatalf("container %s: memory limit %v became %v", l.before[i].Name, b.Limits[corev1.ResourceMemory], a.Limits[corev1.ResourceMemory])
			}
		}
	}
}

func sameQuantity(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, oka := a[name]
	qb, okb := b[name]
	return oka == okb && qa.Cmp(qb) == 0
}
