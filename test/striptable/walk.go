// Package striptable generates the probes that prove wincompat's strip table against an API server: one
// pod spec per field (and per value, for booleans and enums) found by walking the pod spec's schema as
// that API server serves it (OpenAPI v3), so that a field new in a release is probed the day that release
// is, without anyone listing it. The e2e test TestStripTableProbe sends them (test/e2e/releases/striptable_test.go).
package striptable

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Schema is the part of an OpenAPI v3 schema object the walk reads.
type Schema struct {
	Ref                  string             `json:"$ref"`
	Type                 string             `json:"type"`
	Format               string             `json:"format"`
	Enum                 []any              `json:"enum"`
	Properties           map[string]*Schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *Schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	AllOf                []*Schema          `json:"allOf"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string"`
}

// Document is an OpenAPI v3 document as kube-apiserver serves it at /openapi/v3/api/v1.
type Document struct {
	Components struct {
		Schemas map[string]*Schema `json:"schemas"`
	} `json:"components"`
}

// PodSpecSchema names the pod spec's schema in the core group's document.
const PodSpecSchema = "io.k8s.api.core.v1.PodSpec"

// Probe is one field of the pod spec set to one value, with whatever the field's parents require.
type Probe struct {
	// Path is the field's path from the pod, containers as containers[*]: spec.containers[*].securityContext.runAsUser.
	Path string
	// Value is the value the field was given, as JSON.
	Value string
	// Spec is a fragment of the pod spec: Merge it into a valid pod's spec.
	Spec map[string]any
}

// skipped are the parts of the pod spec the probe leaves out, and why.
var skipped = map[string]string{
	"spec.os": "what every probe sets: the operating system under test",
}

// Ephemeral says whether a probe sets a field of an ephemeral container: those are refused on create
// and added to an existing pod through its ephemeralcontainers subresource.
func (p Probe) Ephemeral() bool { return strings.HasPrefix(p.Path, "spec.ephemeralContainers") }

// Skipped returns the paths Probes leaves out, with the reason, for the report.
func Skipped() map[string]string { return skipped }

// maxDepth bounds the walk: the pod spec is about 8 levels deep; a recursive schema must not hang it.
const maxDepth = 12

// Probes walks the pod spec's schema in doc and returns one probe per leaf field and value, sorted by path.
func Probes(doc *Document) ([]Probe, error) {
	spec, ok := doc.Components.Schemas[PodSpecSchema]
	if !ok {
		return nil, fmt.Errorf("the document has no %s", PodSpecSchema)
	}
	w := walker{doc: doc}
	w.object(spec, "spec", 0, func(v any) map[string]any { return v.(map[string]any) })
	slices.SortStableFunc(w.probes, func(a, b Probe) int { return strings.Compare(a.Path, b.Path) })
	return w.probes, w.err
}

type walker struct {
	doc    *Document
	probes []Probe
	err    error
}

// resolve follows $ref, directly or through allOf (how v3 refers to a type while adding a description).
func (w *walker) resolve(s *Schema) *Schema {
	for range maxDepth {
		switch {
		case s == nil:
			return nil
		case s.Ref != "":
			name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
			next, ok := w.doc.Components.Schemas[name]
			if !ok && w.err == nil {
				w.err = fmt.Errorf("unresolved %s", s.Ref)
			}
			s = next
		case len(s.AllOf) == 1 && s.Type == "" && len(s.Properties) == 0:
			s = s.AllOf[0]
		default:
			return s
		}
	}
	return s
}

// refName is the schema name s refers to, "" when it refers to none.
func (w *walker) refName(s *Schema) string {
	for s != nil {
		if s.Ref != "" {
			return strings.TrimPrefix(s.Ref, "#/components/schemas/")
		}
		if len(s.AllOf) != 1 {
			return ""
		}
		s = s.AllOf[0]
	}
	return ""
}

// wrap builds the pod spec fragment around a value of the field being walked.
type wrap func(v any) map[string]any

// object walks the properties of an object schema at path; wrapField places one of its fields' values.
func (w *walker) object(s *Schema, path string, depth int, place wrap) {
	if depth > maxDepth {
		return
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := path + "." + name
		if _, ok := skipped[p]; ok {
			continue
		}
		fieldSchema := s.Properties[name]
		w.field(fieldSchema, p, name, depth, func(v any) map[string]any {
			obj := w.required(s, path, name, 0)
			obj[name] = v
			return place(obj)
		})
	}
}

// field walks one field: a leaf yields probes, an object or a list its own fields.
func (w *walker) field(raw *Schema, path, name string, depth int, place wrap) {
	typeName := w.refName(raw)
	s := w.resolve(raw)
	if s == nil {
		return
	}
	switch {
	case isLeaf(s, typeName):
		for _, v := range w.samples(s, typeName, path) {
			w.add(path, v, place(v))
		}
	case s.Type == "array":
		item := w.resolve(s.Items)
		if item == nil {
			return
		}
		if len(item.Properties) > 0 {
			w.object(item, path+"[*]", depth+1, func(v any) map[string]any { return place([]any{v}) })
			return
		}
		for _, v := range w.samples(item, w.refName(s.Items), path) {
			w.add(path, []any{v}, place([]any{v}))
		}
	case len(s.AdditionalProperties) > 0:
		var values Schema
		if err := json.Unmarshal(s.AdditionalProperties, &values); err != nil {
			return
		}
		vs := w.samples(w.resolve(&values), w.refName(&values), path)
		if len(vs) == 0 {
			return
		}
		v := map[string]any{mapKey(path): vs[0]}
		w.add(path, v, place(v))
	default:
		w.object(s, path, depth+1, place)
	}
}

func (w *walker) add(path string, value any, spec map[string]any) {
	b, _ := json.Marshal(value)
	w.probes = append(w.probes, Probe{Path: path, Value: string(b), Spec: spec})
}

// required returns an object of s's required fields other than except, each at its least value: the
// parents a probed field needs to be valid at all (a volume's name, a port's number).
func (w *walker) required(s *Schema, path, except string, depth int) map[string]any {
	obj := map[string]any{}
	for name := range s.Properties {
		if name == except || !slices.Contains(s.Required, name) && !companion(path, name) {
			continue
		}
		if excludes(except, name) {
			continue
		}
		// A requirement's values need an operator that takes them.
		if name == "operator" && except == "values" {
			obj[name] = "In"
			continue
		}
		if v, ok := w.least(s.Properties[name], path+"."+name, depth); ok {
			obj[name] = v
		}
	}
	return obj
}

// companions are fields the schema calls optional that validation requires (a reference's name, a
// container's image), with the ends of the paths of the objects they are required in ("" for any):
// filled in like required ones.
var companions = map[string][]string{"name": {""}, "secretName": {""}, "targetWWNs": {""}, "image": {"ontainers[*]"},
	// A probe needs a handler; an init container may carry probes and lifecycle hooks only as a sidecar.
	"exec": {"Probe"}, "command": {"Probe.exec"}, "restartPolicy": {"initContainers[*]"},
	"accessModes": {"volumeClaimTemplate.spec"}, "volumeName": {"scaleIO", "storageos"}, "lun": {"fc"},
	// An ephemeral volume's claim must request storage.
	"resources": {"volumeClaimTemplate.spec"}, "requests": {"volumeClaimTemplate.spec.resources"},
	// A pod certificate needs its signer and a file to write; a downward API item, what to write.
	"signerName": {"podCertificate"}, "credentialBundlePath": {"podCertificate"}, "fieldRef": {"downwardAPI.items[*]"},
	"containerName": {"downwardAPI.items[*].resourceFieldRef"}, "reference": {"volumes[*].image"},
	"configMapRef": {"envFrom[*]"},
	// A toleration of a named taint and effect: a value and a toleration period need both.
	"key": {"tolerations[*]"}, "effect": {"tolerations[*]"}}

// oneOf are groups of fields of which an object takes exactly one: a companion gives way to the member
// probed (a probe's handlers, a downward API item's source, an environment source, the files of a pod
// certificate, the identities of a fibre channel volume).
var oneOf = [][]string{{"exec", "httpGet", "tcpSocket", "grpc"}, {"fieldRef", "resourceFieldRef"}, {"configMapRef", "secretRef"},
	{"credentialBundlePath", "keyPath", "certificateChainPath"}, {"targetWWNs", "wwids"}}

// excludes says whether setting field rules out the companion name.
func excludes(field, name string) bool {
	return slices.ContainsFunc(oneOf, func(group []string) bool {
		return field != name && slices.Contains(group, field) && slices.Contains(group, name)
	})
}

func companion(objectPath, name string) bool {
	// An embedded object's metadata takes no name (an ephemeral volume's claim template).
	if name == "name" && strings.HasSuffix(objectPath, ".metadata") {
		return false
	}
	return slices.ContainsFunc(companions[name], func(within string) bool { return strings.HasSuffix(objectPath, within) })
}

// least is the smallest valid-looking value of a schema: a required field filled in.
func (w *walker) least(raw *Schema, path string, depth int) (any, bool) {
	typeName := w.refName(raw)
	s := w.resolve(raw)
	if s == nil || depth > maxDepth {
		return nil, false
	}
	switch {
	case isLeaf(s, typeName):
		vs := w.samples(s, typeName, path)
		if len(vs) == 0 {
			return nil, false
		}
		// Of an enum, the value that needs nothing else: an operator that takes no values.
		if i := slices.Index(vs, any("Exists")); i >= 0 {
			return vs[i], true
		}
		return vs[0], true
	case s.Type == "array":
		v, ok := w.least(s.Items, path+"[*]", depth+1)
		if !ok {
			return []any{}, true
		}
		return []any{v}, true
	case len(s.AdditionalProperties) > 0:
		if k := mapKey(path); k == storage {
			return map[string]any{k: "1"}, true
		}
		return map[string]any{}, true
	default:
		return w.required(s, path, "", depth+1), true
	}
}

// isLeaf says whether a schema takes one value rather than fields or items: a scalar, a quantity or an
// int-or-string (both objects to Go, strings or numbers to JSON).
func isLeaf(s *Schema, typeName string) bool {
	return typeName == quantity || typeName == intOrString || s.IntOrString ||
		len(s.Properties) == 0 && s.Type != "array" && len(s.AdditionalProperties) == 0
}

const (
	quantity    = "io.k8s.apimachinery.pkg.api.resource.Quantity"
	intOrString = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
)

// samples are the values a leaf is probed with: every value of an enum, true and false for a boolean
// (a pointer set to false is still set), and one value of the field's kind otherwise.
func (w *walker) samples(s *Schema, typeName, path string) []any {
	name := path[strings.LastIndexAny(path, ".")+1:]
	name = strings.TrimSuffix(name, "[*]")
	switch {
	case typeName == quantity:
		return []any{"1"}
	case typeName == intOrString || s.IntOrString:
		return []any{8080}
	case s.Format == "date-time":
		return []any{"2026-01-01T00:00:00Z"}
	case len(s.Enum) > 0:
		return s.Enum
	}
	switch s.Type {
	case "boolean":
		return []any{true, false}
	case "integer":
		if v, ok := intSamples[name]; ok {
			return []any{v}
		}
		return []any{1}
	case "string":
		for suffix, v := range pathSamples {
			if strings.HasSuffix(path, suffix) {
				return []any{v}
			}
		}
		if v, ok := stringSamples[name]; ok {
			return []any{v}
		}
		return []any{"probe"}
	case "number":
		return []any{1}
	}
	return nil
}

// stringSamples are values valid for fields whose format the schema does not state: an absolute path
// where a path must be one, a resource name where a reference is, a signal where one is expected.
var stringSamples = map[string]string{
	"path":                "probe", // relative: items, projections; absolute ones are pathSamples
	"mountPath":           "/probe",
	"subPath":             "probe",
	"image":               "probe",
	"resource":            "limits.cpu",
	"fieldPath":           "metadata.name",
	"apiVersion":          "v1",
	"topologyKey":         "kubernetes.io/hostname",
	"key":                 "probe",
	"signerName":          "example.com/probe",
	"operator":            "Exists",
	"seLinuxChangePolicy": "Recursive",
	"iqn":                 "iqn.2001-04.com.example:probe",
	"registry":            "probe:7861",
	"keyType":             "RSA3072",
	"diskURI":             "https://probe.blob.core.windows.net/vhds/probe.vhd", // a shared disk, the default kind
	"ip":                  "10.0.0.1",
	"nameservers":         "10.0.0.1",
	"initiatorName":       "iqn.2001-04.com.example:probe",
	"containerName":       "c",
	"resourceName":        "cpu",
	"recursiveReadOnly":   "Disabled",
	"bindMountOptions":    "nodev",
	"type":                "",
}

// pathSamples are values by the end of their field path: paths validation wants absolute, and a name
// for init and ephemeral containers that is not the containers' own.
var pathSamples = map[string]string{"hostPath.path": "/probe", "nfs.path": "/probe", "httpGet.path": "/probe", "initContainers[*].name": "init",
	"initContainers[*].restartPolicy": "Always", "ephemeralContainers[*].name": "debug",
	"resizePolicy[*].restartPolicy": "NotRequired", "evictionResponders[*].name": "example.com/probe"}

var intSamples = map[string]int{
	"expirationSeconds":    3600,
	"maxExpirationSeconds": 3600,
	"containerPort":        8080,
	"hostPort":             8080,
	"port":                 8080,
	"maxSkew":              1,
	"defaultMode":          0o644,
	"priority":             1000, // an eviction responder's: lower ones are Kubernetes' own
	"mode":                 0o644,
}

// mapKey is a key valid for the map field at path: a qualified name for labels and selectors, a
// resource name for resource lists (storage for a volume claim's).
func mapKey(path string) string {
	switch path[strings.LastIndex(path, ".")+1:] {
	case "limits", "requests", "overhead", "capacity":
		if strings.Contains(path, "volumeClaimTemplate") {
			return storage
		}
		return "cpu"
	}
	return "probe.example.com/key"
}

const storage = "storage"

// Merge deep-merges the fragment into dst (a pod spec as JSON): objects key by key, lists item by item,
// so that a probe's first container is the pod's first container with the probed field added.
func Merge(dst, fragment map[string]any) {
	for k, v := range fragment {
		dst[k] = mergeValue(dst[k], v)
	}
}

func mergeValue(dst, v any) any {
	switch v := v.(type) {
	case map[string]any:
		d, ok := dst.(map[string]any)
		if !ok {
			return v
		}
		Merge(d, v)
		return d
	case []any:
		d, ok := dst.([]any)
		if !ok {
			return v
		}
		for i, item := range v {
			if i < len(d) {
				d[i] = mergeValue(d[i], item)
			} else {
				d = append(d, item)
			}
		}
		return d
	}
	return v
}
