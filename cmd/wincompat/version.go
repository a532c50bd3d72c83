package main

import "runtime/debug"

// version is stamped by the Makefile and the Dockerfile (-X main.version=...). Left empty by a plain
// go build or go install, it is read from the build itself (buildVersion), so that the manifests and
// annotations it writes (wincompat.io/version, the admission policies' marker) say which code made them.
var version string

func init() {
	if version == "" {
		version = buildVersion(debug.ReadBuildInfo())
	}
}

// buildVersion is the main module's version when the go command knows one (go install ...@v1.2.0, or
// since Go 1.24 a go build in a checkout: the tag, or a pseudo-version, +dirty when modified); else the
// commit, as git describe --always --dirty writes it; else dev (go test, or a build outside git).
func buildVersion(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return "dev"
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified == "true" {
		revision += "-dirty"
	}
	return revision
}
