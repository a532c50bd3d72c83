package images

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// PullSecretKeychain returns a Config.PodPullSecrets that reads a pod's imagePullSecrets with client.
// The webhook then needs get on Secrets in every namespace whose pods it reads images of, which is why
// it is off by default. The pod's ServiceAccount is not read: its pull secrets are already in the pod,
// copied by the ServiceAccount admission plugin, which runs before webhooks. Secrets that do not exist
// are skipped, as the kubelet does.
func PullSecretKeychain(client kubernetes.Interface) func(ctx context.Context, namespace string, names []string) (authn.Keychain, error) {
	return func(ctx context.Context, namespace string, names []string) (authn.Keychain, error) {
		return kauth.New(ctx, client, kauth.Options{
			Namespace:          namespace,
			ServiceAccountName: kauth.NoServiceAccount,
			ImagePullSecrets:   names,
		})
	}
}

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
