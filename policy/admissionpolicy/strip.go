package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// The strip table as CEL (policy/strip.go: LinuxOnlyFields, stripLinuxOnly): one expression per row,
// read from the same table.

// strips is the strip table as a CEL list of groups, one per object it removes fields from (the pod's
// spec, its securityContext, each container's securityContext): a group is a list of maps of strings,
// one per field removed: its JSON pointer ("ptr"), the object's record path ("p") and its member of the
// record's group ("m", `"field":value`). One expression per row yields the patch and the record.
func strips(s shape) listVar {
	var spec, podSC, any []string
	var containerFields []policy.LinuxOnlyField
	for _, f := range policy.LinuxOnlyFields() {
		switch f.Level {
		case policy.PodLevel:
			spec = append(spec, stripOne(optional(s.spec), quote(s.specPtr), text("spec"), f))
			any = append(any, stripCond(optional(s.spec), f))
		case policy.PodSecurityContextLevel:
			podSC = append(podSC, stripOne(optional(s.spec)+".?securityContext", quote(s.specPtr+"/securityContext"), text("spec.securityContext"), f))
			any = append(any, stripCond(optional(s.spec)+".?securityContext", f))
		case policy.ContainerSecurityContextLevel:
			containerFields = append(containerFields, f)
		}
	}
	group := func(path jsonText, rows []string) string {
		return fmt.Sprintf(`[%s]`, strings.Join(rows, " + "))
	}
	out := []string{group(text("spec"), spec), group(text("spec.securityContext"), podSC)}
	out = append(out, perContainer(s, func(ptr string, path jsonText) string {
		var rows []string
		for _, f := range containerFields {
			rows = append(rows, stripOne("c.?securityContext", ptr+" + '/securityContext'", path, f))
		}
		return group(path, rows)
	})...)
	any = append(any, anyContainer(s, containerLists, func(c string) string {
		var rows []string
		for _, f := range containerFields {
			rows = append(rows, stripCond(c+".?securityContext", f))
		}
		return anyOf(rows)
	}))
	return listVar{name: "removals", list: strings.Join(out, " +\n"), any: anyOf(any)}
}

// stripGroupsExpr is the stripGroups variable: the groups of removals that remove anything, each with
// its object's path ("p") and its members joined ("v"), for the record.
const stripGroupsExpr = `variables.removals.filter(g, size(g) > 0).map(g, {"p": string(g[0].p), "v": g.map(r, string(r.m)).join(',')})`

// stripGroups is the strip table's part: per group, its record entry ["s", object, {members}], or -1
// for the members of the group before (policy.EncodeChanges writes the same), and the removals
// (variables.removals, which is removals.list).
func stripGroups(removals listVar) part {
	code, _ := json.Marshal(policy.ActionCode(policy.Strip))
	return part{
		records: fmt.Sprintf(`variables.stripGroups.transformList(i, g, %s + g.p + '",' + (i > 0 && variables.stripGroups[i - 1].v == g.v ? '-1' : '{' + g.v + '}') + ']')`, quote("["+string(code)+`,"`)),
		ops:     `variables.removals.map(g, g.map(r, JSONPatch{op: "remove", path: r.ptr})).flatten()`,
		any:     removals.any,
	}
}

// stripOne removes field f of the object at parent (an optional CEL expression) when the API server
// would reject it; parentPtr is a CEL string, parentPath the record's path of parent. Its member of the
// record's group is the field and its value, or policy.FromNotKept for a value CEL cannot render (lists
// and objects): null would read as a field that was there without a value.
func stripOne(parent, parentPtr string, parentPath jsonText, f policy.LinuxOnlyField) string {
	value := parent + ".?" + f.Name
	cond := stripCond(parent, f)
	from := scalar(value+".value()", kindOf(levelTypes[f.Level], f.Name))
	if from.cel == "" {
		from = jsonValue{quote(policy.FromNotKept)}
	}
	field, _ := json.Marshal(f.Name)
	return fmt.Sprintf(`(%s ? [{"ptr": %s + '/%s', "p": %s, "m": %s + %s}] : [])`, cond, parentPtr, f.Name, parentPath.cel, quote(string(field)+":"), from.cel)
}

// stripCond is true when the API server would reject field f of the object at parent (an optional CEL
// expression) on a Windows pod.
func stripCond(parent string, f policy.LinuxOnlyField) string {
	value := parent + ".?" + f.Name
	switch f.RejectedIf {
	case policy.WhenTrue:
		return value + ".orValue(false) == true"
	case policy.WhenNonEmpty:
		return "size(" + value + ".orValue([])) > 0"
	}
	return value + ".hasValue()"
}

// kindOf is the kind of the Go field with JSON name name in t, pointers followed.
func kindOf(t reflect.Type, name string) reflect.Kind {
	for i := range t.NumField() {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("json"), ",")[0] != name {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		return ft.Kind()
	}
	return reflect.Invalid
}

var levelTypes = map[policy.FieldLevel]reflect.Type{
	policy.PodLevel:                      reflect.TypeFor[corev1.PodSpec](),
	policy.PodSecurityContextLevel:       reflect.TypeFor[corev1.PodSecurityContext](),
	policy.ContainerSecurityContextLevel: reflect.TypeFor[corev1.SecurityContext](),
}
