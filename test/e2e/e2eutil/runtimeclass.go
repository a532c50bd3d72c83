package e2eutil

import (
	"context"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/webhook/server"
)

// ManageRuntimeClasses is the server option under test.
func ManageRuntimeClasses(o *server.Options) { o.ManageRuntimeClasses = true }

// GetClass reads a RuntimeClass; ok is false when it does not exist.
func (cl *Cluster) GetClass(t *testing.T, name string) (nodev1.RuntimeClass, bool) {
	t.Helper()
	var rc nodev1.RuntimeClass
	err := cl.C.Get(context.Background(), client.ObjectKey{Name: name}, &rc)
	if apierrors.IsNotFound(err) {
		return rc, false
	}
	if err != nil {
		t.Fatalf("reading RuntimeClass %s: %v", name, err)
	}
	return rc, true
}

// Eventually polls cond every 100ms for up to 30s and fails with what when it never holds.
func Eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("after 30s: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}
