package striptable

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// Kubernetes keeps its own list of the pod spec's OS-specific fields in TestValidateOSFields
// (pkg/apis/core/validation), checked there against every field of the internal pod spec. It is a
// cross-check of the probe, not a substitute: it names fields, not what the API server refuses, and a
// field validated per OS elsewhere (a container's stop signal, pod-level resources) is "OS-neutral" there.

const (
	upstreamFile = "pkg/apis/core/validation/validation_test.go"
	upstreamTest = "TestValidateOSFields"
	upstreamList = "osSpecificFields"
)

// UpstreamOSSpecific returns the fields TestValidateOSFields of k8s.io/kubernetes at version lists as
// OS-specific, as probe paths (spec.containers[*].securityContext.runAsUser), read from that release's
// source, which the go command fetches from the module proxy into the module cache when it is not there.
func UpstreamOSSpecific(version string) ([]string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+version).Output()
	if err != nil {
		return nil, fmt.Errorf("fetching k8s.io/kubernetes@%s for %s: %w", version, upstreamTest, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("fetching k8s.io/kubernetes@%s for %s: %s %v", version, upstreamTest, mod.Error, err)
	}
	file := filepath.Join(mod.Dir, upstreamFile)
	names, err := osSpecificNames(file)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(names))
	for _, n := range names {
		paths = append(paths, probePath(n))
	}
	return paths, nil
}

// osSpecificNames reads the string literals assigned to osSpecificFields in TestValidateOSFields: the
// list is built with sets.NewString in some releases and sets.New[string] in others, so any literal
// under the assignment counts.
func osSpecificNames(file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != upstreamTest || fn.Body == nil {
			return !ok
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
				return true
			}
			if id, ok := as.Lhs[0].(*ast.Ident); !ok || id.Name != upstreamList {
				return true
			}
			ast.Inspect(as.Rhs[0], func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						names = append(names, s)
					}
				}
				return true
			})
			return false
		})
		return false
	})
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no %s in %s: upstream changed the test; read it and update test/striptable/upstream.go", file, upstreamList, upstreamTest)
	}
	return names, nil
}

// probePath turns a Go field path of the internal pod spec (Containers[*].SecurityContext.SELinuxOptions)
// into its JSON path from the pod (spec.containers[*].securityContext.seLinuxOptions). A wrong guess
// does not pass unseen: the caller finds no served field under it.
func probePath(goPath string) string {
	// Before 1.37 the internal pod security context held the host namespaces, which the v1 API has always
	// kept in the pod spec itself.
	for _, f := range []string{"HostNetwork", "HostPID", "HostIPC", "HostUsers", "ShareProcessNamespace"} {
		if goPath == "SecurityContext."+f {
			goPath = f
		}
	}
	var segs []string
	for _, seg := range strings.Split(goPath, ".") {
		// The one embedded struct of the pod spec, inlined in JSON.
		if seg == "EphemeralContainerCommon" {
			continue
		}
		name, list := strings.CutSuffix(seg, "[*]")
		if list {
			segs = append(segs, jsonName(name)+"[*]")
		} else {
			segs = append(segs, jsonName(name))
		}
	}
	return "spec." + strings.Join(segs, ".")
}

// jsonName is the API's JSON name for a Go field name: the leading capitals lower-cased, except the
// last of several when a lower-case letter follows it (SELinuxOptions: seLinuxOptions, FSGroup: fsGroup,
// HostIPC: hostIPC, OS: os).
func jsonName(goName string) string {
	r := []rune(goName)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	if n > 1 && n < len(r) {
		n--
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}
