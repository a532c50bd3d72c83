package certs

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestSecretOwnedByItsConfigMap: with OwnerConfigMap, the Secret is written only while that ConfigMap
// exists, and always names it (its current UID) as its owner, so that the garbage collector deletes the
// Secret with the release (TestChartLifecycle shows the deletion on a real API server).
func TestSecretOwnedByItsConfigMap(t *testing.T) {
	ctx := context.Background()
	const owner = "wincompat-policy-last-good"
	c := fake.NewClientBuilder().Build()
	cfg := Config{Namespace: testNamespace, SecretName: testSecret, ServiceName: testService, WebhookConfigName: testWebhooks, OwnerConfigMap: owner}
	cfg.Defaults()
	iss := &Issuer{Config: cfg, Client: c, Log: logr.Discard()}
	secret := func() (*corev1.Secret, error) {
		var s corev1.Secret
		return &s, c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: testSecret}, &s)
	}

	// No owner (the release being uninstalled, or not installed yet): no Secret.
	if err := iss.Reconcile(ctx); err == nil {
		t.Error("Reconcile without the owner ConfigMap: no error")
	}
	if _, err := secret(); !apierrors.IsNotFound(err) {
		t.Fatalf("a Secret was created without its owner: %v", err)
	}

	ownedBy := func(uid string) {
		t.Helper()
		if err := iss.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		s, err := secret()
		if err != nil {
			t.Fatal(err)
		}
		want := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner, UID: k8stypes.UID("uid-" + uid)}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0] != want {
			t.Errorf("owners %+v, want only %+v", s.OwnerReferences, want)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: owner, UID: "uid-1"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	ownedBy("1")
	ownedBy("1") // unchanged on the next pass

	// A Secret from before owners (an upgrade) gets one; a ConfigMap made again (a reinstall) replaces it.
	s, _ := secret()
	s.OwnerReferences = nil
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	ownedBy("1")
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: owner, UID: "uid-2"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	ownedBy("2")
}
