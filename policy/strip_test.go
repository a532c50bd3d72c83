package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy/readmetest"
)

// TestStripTableNamesRealFields proves every row names a JSON field of the type it strips, so a typo in
// the table cannot silently strip nothing.
func TestStripTableNamesRealFields(t *testing.T) {
	types := map[FieldLevel]reflect.Type{
		PodLevel:                      reflect.TypeFor[corev1.PodSpec](),
		PodSecurityContextLevel:       reflect.TypeFor[corev1.PodSecurityContext](),
		ContainerSecurityContextLevel: reflect.TypeFor[corev1.SecurityContext](),
	}
	for _, f := range LinuxOnlyFields() {
		field, ok := jsonField(types[f.Level], f.Name)
		if !ok {
			t.Errorf("%s: no such JSON field", f.Path())
			continue
		}
		// A list or map field that is rejected "whenever set" can be set but empty, which the typed object
		// marshals as absent: the diff cannot remove it. webhook.Mutate handles the one such row; a new one
		// needs the same care.
		if k := field.Type.Kind(); (k == reflect.Slice || k == reflect.Map) && f.RejectedIf == WhenSet && f.Path() != "spec.securityContext.supplementalGroups" {
			t.Errorf("%s: a list rejected when empty needs the explicit remove webhook.Mutate does for supplementalGroups", f.Path())
		}
	}
}

func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("json"), ",")[0] == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// TestStripTableStripsEveryRow sets each row's field to a value the API server rejects and checks that
// stripping removes it and records it; and that the kept fields survive.
func TestStripTableStripsEveryRow(t *testing.T) {
	spec := corev1.PodSpec{
		HostPID: true, HostIPC: true, ShareProcessNamespace: new(false), HostUsers: new(true),
		Resources:   &corev1.ResourceRequirements{},
		HostNetwork: true,
		SecurityContext: &corev1.PodSecurityContext{
			SELinuxOptions: &corev1.SELinuxOptions{}, SeccompProfile: &corev1.SeccompProfile{}, AppArmorProfile: &corev1.AppArmorProfile{},
			FSGroup: new(int64(1)), FSGroupChangePolicy: new(corev1.FSGroupChangeAlways), RunAsUser: new(int64(0)), RunAsGroup: new(int64(0)),
			SupplementalGroups: []int64{}, SupplementalGroupsPolicy: new(corev1.SupplementalGroupsPolicyMerge),
			SELinuxChangePolicy: new(corev1.SELinuxChangePolicyRecursive), Sysctls: []corev1.Sysctl{{Name: "a", Value: "b"}},
			RunAsNonRoot: new(true), WindowsOptions: &corev1.WindowsSecurityContextOptions{},
		},
	}
	full := func() *corev1.SecurityContext {
		return &corev1.SecurityContext{
			SELinuxOptions: &corev1.SELinuxOptions{}, SeccompProfile: &corev1.SeccompProfile{}, AppArmorProfile: &corev1.AppArmorProfile{},
			Capabilities: &corev1.Capabilities{}, ReadOnlyRootFilesystem: new(false), Privileged: new(false), AllowPrivilegeEscalation: new(false),
			ProcMount: new(corev1.DefaultProcMount), RunAsUser: new(int64(0)), RunAsGroup: new(int64(0)),
			RunAsNonRoot: new(true), WindowsOptions: &corev1.WindowsSecurityContextOptions{},
		}
	}
	spec.Containers = []corev1.Container{{Name: "c", SecurityContext: full()}}
	spec.InitContainers = []corev1.Container{{Name: "i", SecurityContext: full()}}
	spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", SecurityContext: full()}}}

	rec := &recorder{}
	stripLinuxOnly(&spec, rec)

	podRows, containerRows := 0, 0
	for _, f := range LinuxOnlyFields() {
		if f.Level == ContainerSecurityContextLevel {
			containerRows++
		} else {
			podRows++
		}
	}
	if want := podRows + 3*containerRows; len(rec.changes) != want {
		t.Errorf("recorded %d changes, want %d", len(rec.changes), want)
	}
	kept := corev1.PodSpec{
		HostNetwork:     true,
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), WindowsOptions: &corev1.WindowsSecurityContextOptions{}},
	}
	keptSC := &corev1.SecurityContext{RunAsNonRoot: new(true), WindowsOptions: &corev1.WindowsSecurityContextOptions{}}
	kept.Containers = []corev1.Container{{Name: "c", SecurityContext: keptSC}}
	kept.InitContainers = []corev1.Container{{Name: "i", SecurityContext: keptSC}}
	kept.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", SecurityContext: keptSC}}}
	if !reflect.DeepEqual(spec, kept) {
		t.Errorf("after stripping:\n%+v\nwant:\n%+v", spec, kept)
	}
}

func renderStripTable() string {
	var b strings.Builder
	b.WriteString("| where | field | rejected when |\n| --- | --- | --- |\n")
	for _, f := range LinuxOnlyFields() {
		where := map[FieldLevel]string{
			PodLevel:                      "`spec`",
			PodSecurityContextLevel:       "`spec.securityContext`",
			ContainerSecurityContextLevel: "`securityContext` of every container, init and ephemeral container",
		}[f.Level]
		when := map[Rejection]string{WhenSet: "any value, even `false`, `0` or `[]`", WhenTrue: "`true`", WhenNonEmpty: "it holds at least one item"}[f.RejectedIf]
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", where, f.Name, when)
	}
	return b.String()
}

func TestReadmeStripTable(t *testing.T) {
	checkReadmeSection(t, "strip-table", "TestReadmeStripTable", renderStripTable())
}

// The build source order in README.md is generated from the table that chooseBuild runs.
func TestReadmeBuildSources(t *testing.T) {
	var b strings.Builder
	for i, s := range BuildSources() {
		name := "`" + s.Name + "`"
		if strings.HasPrefix(s.Name, "(") {
			name = s.Name
		}
		fmt.Fprintf(&b, "%d. %s — %s;\n", i+1, name, s.Doc)
	}
	checkReadmeSection(t, "build-sources", "TestReadmeBuildSources", b.String())
}

// checkReadmeSection compares the section of README.md between its generated markers with want;
// UPDATE_GOLDEN=1 rewrites it.
func checkReadmeSection(t *testing.T, section, test, want string) {
	t.Helper()
	begin := "<!-- " + section + ":begin (generated by " + test + "; UPDATE_GOLDEN=1 go test ./policy) -->\n"
	readmetest.Check(t, "README.md", begin, "<!-- "+section+":end -->\n", want, "UPDATE_GOLDEN=1 go test ./policy")
}

// The injector table in README.md is generated from linuxOnlyInjectors.
func TestReadmeInjectors(t *testing.T) {
	var b strings.Builder
	b.WriteString("| name | opt-out | why | source |\n| --- | --- | --- | --- |\n")
	for _, in := range Injectors() {
		form := "annotation"
		if in.Label {
			form = "label"
		}
		fmt.Fprintf(&b, "| `%s` | %s `%s: %q` | %s | %s |\n", in.Name, form, in.Key, in.Value, in.Why, in.Source)
	}
	checkReadmeSection(t, "injectors", "TestReadmeInjectors", b.String())
}
