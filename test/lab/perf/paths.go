package perf

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/wincompat/wincompat/test/controlplane"
)

// ResolvePaths fills in the defaults the load tools share: the checkout found from the working
// directory, its bin/wincompat (which must exist), results in test/perf, and a temporary work directory
// named after prefix, which the returned cleanup removes; a given work directory is created and kept.
func ResolvePaths(root, wincompat, out, workDir *string, prefix string) (cleanup func(), err error) {
	cleanup = func() {}
	if *root == "" {
		if *root, err = controlplane.RepoRoot(); err != nil {
			return cleanup, err
		}
	}
	if *wincompat == "" {
		*wincompat = filepath.Join(*root, "bin", "wincompat")
	}
	if *out == "" {
		*out = filepath.Join(*root, "test", "perf")
	}
	if _, err := os.Stat(*wincompat); err != nil {
		return cleanup, fmt.Errorf("%w (run `make build` in %s)", err, *root)
	}
	if *workDir != "" {
		return cleanup, os.MkdirAll(*workDir, 0o755)
	}
	if *workDir, err = os.MkdirTemp("", prefix); err != nil {
		return cleanup, err
	}
	dir := *workDir
	return func() { os.RemoveAll(dir) }, nil
}
