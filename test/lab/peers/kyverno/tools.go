//go:build tools

// Package kyverno pins Kyverno's admission controller, a peer measured by `make perf-peers`
// (test/lab/README.md). It lives in a module of its own so that its dependencies never enter
// wincompat's or the test module's, and `make test` never builds it.
package kyverno

import _ "github.com/kyverno/kyverno/cmd/kyverno"
