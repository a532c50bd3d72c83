package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/wincompat/wincompat/policy"
)

// writeWhole replaces file's content at once, as the kubelet updates a ConfigMap volume; a plain
// WriteFile truncates first, and a poll in between would read an empty policy.
func writeWhole(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file+".tmp", []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
}

func TestPolicyFileReloads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	writeWhole(t, file, "apiVersion: wincompat.io/v1alpha1\nkind: Policy\n")
	changed := make(chan struct{}, 10)
	f := &policyFile{path: file, namespace: "wincompat-system", interval: 20 * time.Millisecond, log: testr.New(t),
		onChange: func() { changed <- struct{}{} }}
	initial, err := f.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	current := &atomic.Pointer[policy.Policy]{}
	current.Store(initial)
	f.current = current
	// Changed after the policy was loaded and before the watcher runs: still picked up.
	writeWhole(t, file, "apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: arm64\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = f.Start(ctx) }()
	select {
	case <-changed:
	case <-time.After(2 * time.Second):
		t.Fatal("no reload")
	}
	if p := current.Load(); p.Arch != "arm64" || p.ExcludedNamespaces[len(p.ExcludedNamespaces)-1] != "wincompat-system" {
		t.Errorf("reloaded policy: %+v", p)
	}
	writeWhole(t, file, "apiVersion: wincompat.io/v1alpha1\nkind: Policy\narch: sparc\n")
	time.Sleep(200 * time.Millisecond)
	if p := current.Load(); p.Arch != "arm64" {
		t.Errorf("an invalid file replaced the policy: %+v", p)
	}
}

func TestPolicyFileInvalidAtStartWithoutStoreIsAnError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &policyFile{path: file}
	if _, err := f.load(context.Background()); err == nil {
		t.Error("without a kept policy to fall back to (--policy-configmap), an invalid policy at start must stop the server, not be ignored")
	}
}

func TestOwnNamespaceIsExcludedFromBothSides(t *testing.T) {
	own := "wincompat-system"
	for _, tc := range []struct {
		name             string
		windows, linux   []string
		wantWin, wantLin []string
	}{
		{"neither list names it", []string{"kube-system"}, []string{"kube-system"}, []string{"kube-system", own}, []string{"kube-system", own}},
		{"only the Windows list does", []string{own}, nil, []string{own}, []string{own}},
		{"only the Linux list does", nil, []string{own}, []string{own}, []string{own}},
		{"both do", []string{own}, []string{own}, []string{own}, []string{own}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy.Default()
			p.ExcludedNamespaces, p.LinuxByDefaultExcludedNamespaces = tc.windows, tc.linux
			before := *p
			got := withOwnNamespace(p, own)
			if !slices.Equal(got.ExcludedNamespaces, tc.wantWin) || !slices.Equal(got.LinuxByDefaultExcludedNamespaces, tc.wantLin) {
				t.Errorf("excluded %v, Linux by default excluded %v; want %v and %v", got.ExcludedNamespaces, got.LinuxByDefaultExcludedNamespaces, tc.wantWin, tc.wantLin)
			}
			if !slices.Equal(p.ExcludedNamespaces, before.ExcludedNamespaces) || !slices.Equal(p.LinuxByDefaultExcludedNamespaces, before.LinuxByDefaultExcludedNamespaces) {
				t.Error("the loaded policy was changed in place; it is shared with readers of the old one")
			}
		})
	}
}
