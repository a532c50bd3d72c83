package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
)

// PullSecretKeychain returns a Config.PodPullSecrets that reads a pod's imagePullSecrets with client.
// The webhook then needs get on Secrets in every namespace whose pods it reads images of, which is why
// it is off by default. The pod's ServiceAccount is not read: its pull secrets are already in the pod,
// copied by the ServiceAccount admission plugin, which runs before webhooks. Secrets that do not exist
// are skipped, as the kubelet does. What a Get answered, a Secret, its absence or an error, is kept for
// pullSecretTTL per namespace and name, so that pods naming many images, or many pods naming the same
// secrets, cost the API server one Get per secret and TTL, not one per lookup.
func PullSecretKeychain(client kubernetes.Interface) func(ctx context.Context, namespace string, names []string) (authn.Keychain, error) {
	got := cache.NewLRUExpireCache(pullSecretEntries)
	type answer struct {
		secret *corev1.Secret
		err    error
	}
	return func(ctx context.Context, namespace string, names []string) (authn.Keychain, error) {
		var secrets []corev1.Secret
		for _, n := range names[:min(len(names), MaxPullSecrets)] {
			key := namespace + "/" + n
			v, ok := got.Get(key)
			if !ok {
				s, err := client.CoreV1().Secrets(namespace).Get(ctx, n, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
					s, err = nil, nil
				case err != nil:
					s = nil
				}
				v = answer{secret: s, err: err}
				if ctx.Err() == nil {
					// A Get cut short by the lookup's deadline says nothing of the Secret.
					got.Add(key, v, pullSecretTTL)
				}
			}
			a := v.(answer)
			if a.err != nil {
				return nil, a.err
			}
			if a.secret != nil {
				secrets = append(secrets, *a.secret)
			}
		}
		return kauth.NewFromPullSecrets(ctx, secrets)
	}
}

// pullSecretTTL is how long a pull secret read (or found missing) is trusted: a Secret created or
// rotated takes effect within it.
const pullSecretTTL = 30 * time.Second

// pullSecretEntries bounds the pull secrets kept: Secrets can hold up to 1 MiB each.
const pullSecretEntries = 256

// DockerConfigKeychain reads the credentials of a kubernetes.io/dockerconfigjson (or legacy
// kubernetes.io/dockercfg) Secret, such as the one the server is given for its registries.
func DockerConfigKeychain(secret *corev1.Secret) (authn.Keychain, error) {
	if secret == nil {
		return nil, errors.New("no pull secret")
	}
	key := map[corev1.SecretType]string{
		corev1.SecretTypeDockerConfigJson: corev1.DockerConfigJsonKey,
		corev1.SecretTypeDockercfg:        corev1.DockerConfigKey,
	}[secret.Type]
	if key == "" {
		return nil, fmt.Errorf("secret %s/%s is of type %q, want %q", secret.Namespace, secret.Name, secret.Type, corev1.SecretTypeDockerConfigJson)
	}
	// NewFromPullSecrets skips a Secret without its key; a pull secret that gives nothing is a mistake.
	if len(secret.Data[key]) == 0 {
		return nil, fmt.Errorf("secret %s/%s has no %s", secret.Namespace, secret.Name, key)
	}
	kc, err := kauth.NewFromPullSecrets(context.Background(), []corev1.Secret{*secret})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return kc, nil
}
