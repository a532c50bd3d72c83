package e2eutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/test/controlplane"
)

// WindowsChartPod is a Windows pod as a hardened Linux chart renders it once declared Windows: the
// security contexts wincompat strips, on every container.
func WindowsChartPod(ns, name, image string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			OS: &corev1.PodOS{Name: corev1.Windows},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000), FSGroup: ptr.To[int64](1000),
				RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: image, SecurityContext: &corev1.SecurityContext{
			RunAsUser: ptr.To[int64](1000), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}})
	}
	return pod
}

func CopyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// CompareGolden fails unless got equals the golden file at path; UPDATE_GOLDEN=1 writes it instead. test
// names the test that rewrites it, for the message.
func CompareGolden(t *testing.T, path string, got []byte, test string) {
	t.Helper()
	if UpdateGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden %s (run UPDATE_GOLDEN=1 go test ./e2e/... -run %s and review it): %v", path, test, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale (run UPDATE_GOLDEN=1 go test ./e2e/... -run %s and review the diff)\n--- got\n%s\n--- want\n%s", path, test, got, want)
	}
}

func UpdateGolden() bool { return os.Getenv("UPDATE_GOLDEN") == "1" }

// BinaryEnv names a wincompat binary already built, which the tests run instead of building their own:
// `make e2e` passes bin/wincompat, built once for every package. A relative path is taken from the
// repository root.
const BinaryEnv = "WINCOMPAT_BINARY"

// built is the binary BuildWincompat made for this test binary, when Main runs it and BinaryEnv is unset.
var built struct {
	main bool // Main runs the tests, so dir can outlive one test and be removed at the end
	once sync.Once
	dir  string
	bin  string
	err  error
}

// BuildWincompat returns the wincompat binary to run: BinaryEnv's when set, else cmd/wincompat built
// from the main module as `make build` does. Without BinaryEnv, a package whose TestMain calls Main
// builds it once for all its tests; any other builds it into tb's temporary directory.
func BuildWincompat(tb testing.TB) string {
	tb.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	if bin := os.Getenv(BinaryEnv); bin != "" {
		if !filepath.IsAbs(bin) {
			bin = filepath.Join(root, bin)
		}
		if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
			tb.Fatalf("%s=%s: not a binary (run `make build`): %v", BinaryEnv, bin, err)
		}
		return bin
	}
	if !built.main {
		return buildWincompat(tb, root, tb.TempDir())
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "wincompat-e2e-"); built.err == nil {
			built.bin, built.err = goBuild(root, built.dir)
		}
	})
	if built.err != nil {
		tb.Fatal(built.err)
	}
	return built.bin
}

func buildWincompat(tb testing.TB, root, dir string) string {
	tb.Helper()
	bin, err := goBuild(root, dir)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// goBuild builds cmd/wincompat into dir with the flags of `make build` that change what it does.
func goBuild(root, dir string) (string, error) {
	bin := filepath.Join(dir, "wincompat")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/wincompat")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/wincompat: %v\n%s", err, out)
	}
	return bin, nil
}

// Main runs a package's tests (call it from TestMain) and then removes the binary BuildWincompat built
// for them.
func Main(m *testing.M) {
	built.main = true
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// WriteKubeConfig writes a kubeconfig for a new user of the control plane, in groups.
func WriteKubeConfig(t testing.TB, cl *Cluster, user string, groups ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := cl.CP.WriteKubeConfig(path, user, groups...); err != nil {
		t.Fatal(err)
	}
	return path
}
