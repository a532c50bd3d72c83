package main

import (
	"runtime/debug"
	"testing"
)

// A go build or go install without -ldflags says which code it is, not "dev".
func TestBuildVersion(t *testing.T) {
	vcs := func(revision, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: revision}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go install @v1.2.0", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, true, "v1.2.0"},
		{"go build in a checkout (Go 1.24+)", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261126113700-0123456789ab+dirty"}, Settings: vcs(rev, "true")}, true, "v0.0.0-20261126113700-0123456789ab+dirty"},
		{"devel, a clean commit", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, true, "0123456789ab"},
		{"devel, modified", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, true, "0123456789ab-dirty"},
		{"no VCS (go test, a tarball)", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "dev"},
		{"no build information", nil, false, "dev"},
	} {
		if got := buildVersion(tc.info, tc.ok); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// The tests themselves run unstamped: goldens and outputs that hold the version hold "dev".
	if version != "dev" {
		t.Errorf("a test binary's version is %q", version)
	}
}
