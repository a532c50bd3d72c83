package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/wincompat/wincompat/webhook/scheduling/registry"
)

// ImageOptions configure reading Windows builds from image registries.
type ImageOptions struct {
	// Timeout bounds the wait of one review; the lookup goes on in the background to warm the cache.
	Timeout time.Duration
	// TagTTL is how long a tag's digest is trusted before it is checked again.
	TagTTL time.Duration
	// PullSecret names a docker-config Secret in the server's namespace with credentials for private
	// registries; empty for anonymous access only.
	PullSecret string
	// PullSecretNamespaces is a label selector of the namespaces whose pods' images may be read with
	// PullSecret and CloudCredentials; the others' are read anonymously. Required with either.
	PullSecretNamespaces string
	// CloudCredentials are the clouds whose registries are read with wincompat's own identity there
	// (its ServiceAccount's workload identity, or the node's).
	CloudCredentials []registry.Cloud
	// ECRRegions and AzureCloud say which of those clouds' registries get the identity (registry.Config).
	ECRRegions []string
	AzureCloud string
	// MaxLookups bounds the registry lookups in flight (0: the resolver's default, 64).
	MaxLookups int
	// MaxLookupsPerRegistry bounds the lookups in flight to one registry host (0: a quarter of
	// MaxLookups).
	MaxLookupsPerRegistry int
	// MaxBytesInFlight bounds the bytes of registry responses held at once (0: 32 MiB).
	MaxBytesInFlight int64
	// AllowPrivateNetworks lets lookups reach loopback and private addresses (never link-local or
	// metadata ones).
	AllowPrivateNetworks bool
}

var sharedImageMetrics = sync.OnceValue(func() *registry.Metrics { return registry.NewMetrics(metrics.Registry) })

// newImageResolver builds the resolver of the server: its own pull secret, read again when it may have
// been rotated, and the pods' pull secrets for the policy's podImagePullSecrets, read with the server's
// own identity (so RBAC decides whether that works).
func newImageResolver(cfg *rest.Config, reader, namespaces client.Reader, namespace string, o ImageOptions, log logr.Logger) (*registry.Resolver, error) {
	c := registry.Config{Timeout: o.Timeout, TagTTL: o.TagTTL, MaxLookups: o.MaxLookups, MaxLookupsPerRegistry: o.MaxLookupsPerRegistry,
		MaxBytesInFlight: o.MaxBytesInFlight, AllowPrivateNetworks: o.AllowPrivateNetworks,
		Metrics: sharedImageMetrics(), Log: log, UnauthorizedHint: "set imageResolver.pullSecret",
		CloudCredentials: o.CloudCredentials, ECRRegions: o.ECRRegions, AzureCloud: o.AzureCloud, CloudHint: "set imageResolver.cloudCredentials and the ServiceAccount annotation for %s"}
	if o.PullSecret != "" {
		c.Keychain = &secretKeychain{reader: reader, key: client.ObjectKey{Namespace: namespace, Name: o.PullSecret}, every: time.Minute, log: log}
	}
	if o.PullSecret != "" || len(o.CloudCredentials) > 0 {
		selector, err := labels.Parse(o.PullSecretNamespaces)
		if err != nil {
			return nil, fmt.Errorf("--image-pull-secret-namespaces: %w", err)
		}
		// Any pod author could otherwise probe the registry through wincompat's credentials, the pull
		// secret's or its cloud identity's alike: only the namespaces the operator chose use them.
		c.KeychainNamespaces = func(name string) bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var ns corev1.Namespace
			if err := namespaces.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
				return false
			}
			return selector.Matches(labels.Set(ns.Labels))
		}
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("image resolver: %w", err)
	}
	// Always there, but used only for lookups that carry pull-secret names, as the policy's
	// podImagePullSecrets makes them: only those are told about the pod's secrets.
	c.PodPullSecrets = registry.PullSecretKeychain(clientset)
	return registry.New(c)
}

// secretKeychain reads the server's pull secret when first needed and again after every, so a rotated
// Secret takes effect without a restart.
type secretKeychain struct {
	reader client.Reader
	key    client.ObjectKey
	every  time.Duration
	log    logr.Logger

	mu      sync.Mutex
	read    time.Time
	current authn.Keychain
	err     error
}

func (k *secretKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	k.mu.Lock()
	if time.Since(k.read) > k.every {
		k.current, k.err = k.load()
		k.read = time.Now()
		if k.err != nil {
			k.log.Error(k.err, "image pull secret unusable; registries are asked anonymously until it is fixed")
		}
	}
	kc, err := k.current, k.err
	k.mu.Unlock()
	if err != nil {
		// Public images need no credentials: a missing or broken pull secret must not fail them too.
		// The error is logged when the Secret is read; private registries then answer unauthorized.
		return authn.Anonymous, nil
	}
	return kc.Resolve(r)
}

func (k *secretKeychain) load() (authn.Keychain, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var s corev1.Secret
	if err := k.reader.Get(ctx, k.key, &s); err != nil {
		return nil, fmt.Errorf("pull secret %s: %w (check --image-pull-secret and that wincompat may get it)", k.key, err)
	}
	return registry.DockerConfigKeychain(&s)
}
