package suggest

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	commands := []string{"serve", "mutate", "audit", "nodes", "policy", "version"}
	keys := []string{"mode", "defaultBuild", "runtimeClassHandler", "runtimeClassesFor", "windowsNodeTaints", "excludedNamespaces", "builds", "runtimeClassName"}
	for _, tc := range []struct {
		typed string
		known []string
		want  string
	}{
		{"exprot", []string{"export"}, "export"},
		{"mutat", commands, "mutate"},
		{"Mutate", commands, "mutate"},
		{"nods", commands, "nodes"},
		{"ver", commands, "version"},
		{"frobnicate", commands, ""},
		{"mutate", commands, ""}, // known: nothing to suggest
		{"windowsNodeTaint", keys, "windowsNodeTaints"},
		{"excludeNamespace", keys, "excludedNamespaces"},
		{"defualtBuild", keys, "defaultBuild"},
		{"runtimeclassname", keys, "runtimeClassName"},
		{"runtimeClass", keys, "runtimeClassName"},
		{"tolerations", keys, ""},
		{"", keys, ""},
		{strings.Repeat("mode", 100), keys, ""},
	} {
		if got, ok := Closest(tc.typed, tc.known); got != tc.want || ok != (tc.want != "") {
			t.Errorf("Closest(%q) = %q, %v; want %q", tc.typed, got, ok, tc.want)
		}
	}
}
