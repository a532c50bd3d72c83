package policy

import (
	"strings"
	"testing"
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
