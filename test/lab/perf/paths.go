package perf

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/wincompat/wincompat/test/controlplane"
)

// ResolvePaths fills in the defaults the lab's commands share: the checkout found from the working
// directory, its bin/wincompat (which must exist), the raw results in ROOT/bin/lab/<lab> (ignored by git:
// a run's raw output is not history worth keeping, the README keeps the latest figures), and a temporary
// work directory named after the lab, which the returned cleanup removes; a given work directory is
// created and kept. The results directory is created, so that a run does not end unable to write.
func ResolvePaths(root, wincompat, out, workDir *string, lab string) (cleanup func(), err error) {
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
		*out = filepath.Join(*root, "bin", "lab", lab)
	}
	if _, err := os.Stat(*wincompat); err != nil {
		return cleanup, fmt.Errorf("%w (run `make build` in %s)", err, *root)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return cleanup, err
	}
	if *workDir != "" {
		return cleanup, os.MkdirAll(*workDir, 0o755)
	}
	if *workDir, err = os.MkdirTemp("", "wincompat-"+lab+"-"); err != nil {
		return cleanup, err
	}
	dir := *workDir
	return func() { os.RemoveAll(dir) }, nil
}
