// Package registry is wincompat's image resolver: it reads from registries which platforms (OS,
// architecture, os.version) container images have, so that the policy can tell which Windows node builds
// can run a pod. It reads manifests and single-platform images' config blobs, never layers; it caches
// what it reads, and a review waits for registries only up to a short deadline.
package registry

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sync/singleflight"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/bytebudget"
)

// Config configures a Resolver. Zero fields take the defaults New documents.
type Config struct {
	// Timeout bounds how long one review waits for registries (default 1s). It must leave the rest of
	// the review room under the webhook's timeoutSeconds.
	Timeout time.Duration
	// BackgroundTimeout bounds one registry lookup, which goes on after its review stopped waiting so
	// that the next review finds the answer cached (default 10s).
	BackgroundTimeout time.Duration
	// TagTTL is how long a tag's digest is trusted before a HEAD request checks it again (default 5m).
	// Digests are immutable and cached until evicted.
	TagTTL time.Duration
	// NegativeTTL is how long an error is remembered, so that a failing registry is not asked again
	// by every review (default 30s).
	NegativeTTL time.Duration
	// MaxEntries bounds each cache: digests, tags, errors and parsed references (default 10000).
	MaxEntries int
	// CacheBytes bounds the caches' memory (default 32 MiB, at least 1 MiB): half for images'
	// platforms, a sixth each for tags, errors and parsed references.
	CacheBytes int64
	// MaxLookups bounds the registry lookups in flight, over all images (default 64): whoever creates
	// pods chooses how many distinct images there are. A lookup that finds the bound reached waits for
	// a slot within Timeout (as many may wait as may run); one that gets none is answered busy
	// (policy.Image.Busy), which is not remembered. Reviews that join a lookup already running take
	// no slot.
	MaxLookups int
	// MaxLookupsPerRegistry bounds the lookups in flight to one registry host (default a quarter of
	// MaxLookups, at least 1), so that a slow or hostile registry leaves slots for the others.
	MaxLookupsPerRegistry int
	// MaxBytesInFlight bounds the bytes of registry responses held at once, over all lookups (default
	// 32 MiB, at least MinBytesInFlight); one registry may hold a quarter of it, or one largest
	// response, whichever is more. A lookup whose response finds the budget spent ends busy.
	MaxBytesInFlight int64
	// AllowPrivateNetworks lets lookups connect to loopback, private (RFC 1918, unique local, CGNAT)
	// and unspecified addresses, and use plain HTTP to loopback registries. Link-local and cloud
	// metadata addresses are never contacted.
	AllowPrivateNetworks bool
	// Keychain gives the credentials for every registry (default anonymous). The server builds it
	// from a docker-config Secret (DockerConfigKeychain), the CLI uses authn.DefaultKeychain.
	Keychain authn.Keychain
	// KeychainNamespaces, when set, says which namespaces' requests may use Keychain; the others'
	// lookups are anonymous. Nil: every request uses it (the CLI). What a lookup with Keychain read is
	// cached apart from what anonymous lookups read, so that a namespace outside the scope learns
	// nothing of a private registry, not even from the cache.
	KeychainNamespaces func(namespace string) bool
	// PodPullSecrets, when set, adds the pod's imagePullSecrets to Keychain (see PullSecretKeychain)
	// for requests whose caller was authenticated (policy.ImageRequest.Authenticated): an unauthenticated caller
	// chooses the namespace. Nil: the pod's pull secrets are never read, and the webhook needs no
	// access to Secrets.
	PodPullSecrets func(ctx context.Context, namespace string, names []string) (authn.Keychain, error)
	// CloudCredentials lets lookups of the registries of these clouds use wincompat's own identity on
	// them (cloudkeychain.go), after Keychain and under the same KeychainNamespaces scope: they are the
	// server's credentials too. Identity and token endpoints are asked only for an enabled cloud's hosts.
	CloudCredentials []Cloud
	// ECRRegions are the AWS regions whose ECR registries CloudECR serves (default $AWS_REGION, else
	// $AWS_DEFAULT_REGION; none: no ECR registry). Each region is a token fetch and a cache entry, and
	// pod authors name any region they like.
	ECRRegions []string
	// AzureCloud is the Azure cloud whose registries CloudACR serves, as `az cloud list` names it
	// (AzureClouds; default AzureCloud, *.azurecr.io): the identity's token goes to no other cloud.
	AzureCloud string
	// CloudHint is the advice for a cloud registry whose credentials wincompat has not, with %s for the
	// cloud's name (ECR, ACR, Artifact Registry): the server names its chart value, the CLI the
	// environment it reads.
	CloudHint string
	// UnauthorizedHint is the advice a registry's refusal gives for Keychain's credentials, since only
	// the caller knows where they come from: "set imageResolver.pullSecret" in the server, docker login
	// for the CLI. Empty: no advice. A lookup that also used the pod's pull secrets names them too.
	UnauthorizedHint string
	// ShowCauses puts the cause of an unreachable registry (refused, DNS, TLS, a timeout, an HTTP
	// status no registry gives) in Image.Err instead of pointing to the log. Only for a caller who
	// named the hosts and owns the network, the CLI: to a pod's author, the cause maps the server's
	// network. The server, which has a log, leaves it false.
	ShowCauses bool
	// Metrics receives the resolver's series; nil records none.
	Metrics *Metrics
	// Now is the clock of the caches' expiry (default time.Now); the deadlines use real time.
	Now func() time.Time
	// Log receives registry errors in full at V(1); users see short ones in Image.Err.
	Log logr.Logger
}

// Resolver reads images' platforms from registries. It is safe for concurrent use.
type Resolver struct {
	c         Config
	transport http.RoundTripper
	// digests: repository@digest → digestEntry. A digest names immutable content: no expiry. What a
	// mirror served is checked against the digest as the registry's own answer is, so both share an
	// entry, which says where it was read.
	digests *lru
	// tags: repository:tag → tagEntry, trusted for TagTTL, then checked by HEAD.
	tags *lru
	// failures: lookup key → error message, for NegativeTTL.
	failures *lru
	// refs: image as spelled → parsed. Parsing costs more than the rest of a warm lookup.
	refs *lru
	// flights: one registry lookup per lookup key at a time, shared by every review that asks.
	flights singleflight.Group
	// slots: a flight holds one while it asks the registry, MaxLookups in all.
	slots *slots
	// queued: lookup keys of flights waiting for a slot. A review that stops waiting for one says
	// busy, not timed out: the registry was not asked yet.
	queued sync.Map
	// bytes: the responses being read, MaxBytesInFlight in all.
	bytes  *bytebudget.Budget
	egress *egress
	// busy is the answer past MaxLookups.
	busy string
}

// MinBytesInFlight is the least Config.MaxBytesInFlight: one largest response, as a lookup holds it.
const MinBytesInFlight = bodyWeight*(maxBody+1) + 64<<10

// forever is the expiry of entries only the LRU bound removes.
const forever = 100 * 365 * 24 * time.Hour

// maxReference bounds what the caches keep of a reference a pod spells: a registry name (253), a
// repository (255 in the distribution spec) and a tag (128) or digest (71+) fit with room to spare.
const maxReference = 1024

// errInvalid is the answer for a reference that does not parse, which no registry could answer.
const errInvalid = "invalid image reference"

type tagEntry struct {
	digest string
	key    string // in digests
	at     time.Time
	// mirror said which digest the tag names ("" the registry itself).
	mirror string
}

// newTagEntry: credsKey keeps what one set of credentials read apart from what others may see.
func newTagEntry(repo name.Repository, digest, credsKey, mirror string, at time.Time) tagEntry {
	return tagEntry{digest: digest, key: repo.Name() + "@" + digest + credsKey, at: at, mirror: mirror}
}

// digestEntry is what an image's manifest says, and the mirror it was read from ("" the registry).
type digestEntry struct {
	platforms []policy.Platform
	mirror    string
}

// image is the answer for l from a cache entry read from mirror.
func (l lookup) image(digest string, platforms []policy.Platform, mirror string) policy.Image {
	img := policy.Image{Digest: digest, Platforms: platforms}
	if mirror != "" {
		img.Mirror, img.MirrorFor = mirror, l.ref.Context().RegistryStr()
	}
	return img
}

// parsed is a reference as go-containerregistry reads it, and its canonical name; ref is nil when the
// image does not parse.
type parsed struct {
	ref  name.Reference
	name string
}

// New applies c's defaults and returns a Resolver.
func New(c Config) (*Resolver, error) {
	for _, d := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{
		{"Timeout", &c.Timeout, time.Second},
		{"BackgroundTimeout", &c.BackgroundTimeout, 10 * time.Second},
		{"TagTTL", &c.TagTTL, 5 * time.Minute},
		{"NegativeTTL", &c.NegativeTTL, 30 * time.Second},
	} {
		if *d.value < 0 {
			return nil, fmt.Errorf("image resolver: %s is negative (%v)", d.name, *d.value)
		}
		if *d.value == 0 {
			*d.value = d.def
		}
	}
	if c.Timeout > c.BackgroundTimeout {
		return nil, fmt.Errorf("image resolver: Timeout (%v) is longer than BackgroundTimeout (%v)", c.Timeout, c.BackgroundTimeout)
	}
	if c.MaxEntries < 0 {
		return nil, fmt.Errorf("image resolver: MaxEntries is negative (%d)", c.MaxEntries)
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = 10000
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = 32 << 20
	}
	if c.CacheBytes < 1<<20 {
		return nil, fmt.Errorf("image resolver: CacheBytes (%d) is under 1 MiB", c.CacheBytes)
	}
	if c.MaxLookups < 0 {
		return nil, fmt.Errorf("image resolver: MaxLookups is negative (%d)", c.MaxLookups)
	}
	if c.MaxLookups == 0 {
		c.MaxLookups = 64
	}
	if c.MaxLookupsPerRegistry < 0 {
		return nil, fmt.Errorf("image resolver: MaxLookupsPerRegistry is negative (%d)", c.MaxLookupsPerRegistry)
	}
	if c.MaxLookupsPerRegistry == 0 {
		c.MaxLookupsPerRegistry = max(1, c.MaxLookups/4)
	}
	if c.MaxBytesInFlight == 0 {
		c.MaxBytesInFlight = 32 << 20
	}
	if c.MaxBytesInFlight < MinBytesInFlight {
		return nil, fmt.Errorf("image resolver: MaxBytesInFlight (%d) is under one largest response (%d)", c.MaxBytesInFlight, MinBytesInFlight)
	}
	if c.Keychain == nil {
		// An empty MultiKeychain resolves every registry to authn.Anonymous.
		c.Keychain = authn.NewMultiKeychain()
	}
	eg := newEgress(c.AllowPrivateNetworks)
	base := http.DefaultTransport.(*http.Transport).Clone()
	// With HTTPS_PROXY set, the proxy's address is what is dialled and checked: the proxy then has to
	// keep registry requests away from what wincompat must not reach.
	base.DialContext = eg.DialContext
	transport := guard{next: base, allowPrivate: c.AllowPrivateNetworks}
	if c.AzureCloud != "" && !slices.Contains(AzureClouds(), c.AzureCloud) {
		return nil, fmt.Errorf("image resolver: unknown Azure cloud %q: use one of %v", c.AzureCloud, AzureClouds())
	}
	if len(c.ECRRegions) == 0 {
		if r := cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")); r != "" {
			c.ECRRegions = []string{r}
		}
	}
	if len(c.CloudCredentials) > 0 {
		// Explicit credentials first: a pull secret for a cloud registry is what the operator chose.
		c.Keychain = authn.NewMultiKeychain(c.Keychain, newCloudKeychain(c.CloudCredentials, c.ECRRegions, c.AzureCloud, &http.Client{Transport: transport}, c.Log))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Resolver{
		c:         c,
		transport: transport,
		// Half the bytes for platforms, the costly part; a pod author's stream of new references or
		// failing images evicts only its own kind.
		digests:  newLRU(c.MaxEntries, c.CacheBytes/2, c.Now, platformsCost),
		tags:     newLRU(c.MaxEntries, c.CacheBytes/6, c.Now, tagCost),
		failures: newLRU(c.MaxEntries, c.CacheBytes/6, c.Now, stringCost),
		refs:     newLRU(c.MaxEntries, c.CacheBytes/6, c.Now, refCost),
		slots:    newSlots(c.MaxLookups, c.MaxLookupsPerRegistry),
		bytes:    bytebudget.NewShared(c.MaxBytesInFlight, max(c.MaxBytesInFlight/4, MinBytesInFlight)),
		egress:   eg,
		busy:     "wincompat's registry lookups are at capacity, try again shortly",
	}, nil
}

// lookup is one image of a request, parsed.
type lookup struct {
	ref  name.Reference
	name string // canonical: registry/repository:tag or registry/repository@digest
	// key names the lookup in flights, tags and failures: the canonical reference, whose pull secrets
	// are used, so that one pod's missing credentials never answer another's, and the route, so that
	// a mirror's answer for a tag (or its failure) never stands for another source's.
	key   string
	creds credentials
	// sources are where the image is read, in order (mirrors.go); none: refusal is the answer.
	sources []source
	refusal string
}

// Lookup answers for every image in req within ctx's deadline and Config.Timeout, whichever ends
// first. An image not answered in time gets an Err saying so, and its lookup goes on in the background,
// bounded by Config.BackgroundTimeout, so that the next review finds it cached. Callers own the
// returned map and slices.
func (r *Resolver) Lookup(ctx context.Context, req policy.ImageRequest) map[string]policy.Image {
	out := make(map[string]policy.Image, len(req.Images))
	type waiting struct {
		image, key, registry string
		ch                   <-chan singleflight.Result
	}
	var waits []waiting
	creds := r.credentials(req)
	routes := newRouter(req.Mirrors)
	for _, image := range req.Images {
		if _, ok := out[image]; ok || slices.ContainsFunc(waits, func(w waiting) bool { return w.image == image }) {
			continue
		}
		l, ok := r.parse(image, creds, routes)
		if !ok {
			out[image] = policy.Image{Err: errInvalid}
			r.c.Metrics.count(resultError)
			continue
		}
		if l.refusal != "" {
			out[image] = policy.Image{Err: l.refusal}
			r.c.Metrics.count(resultError)
			continue
		}
		if img, ok := r.cached(l); ok {
			out[image] = img
			r.c.Metrics.count(cachedResult(img))
			continue
		}
		waits = append(waits, waiting{image: image, key: l.key, registry: sourcesLabel(l.sources), ch: r.start(l)})
	}
	if len(waits) == 0 {
		return out
	}

	budget := r.c.Timeout
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left < budget {
			budget = max(left, 0).Round(time.Millisecond)
		}
	}
	timer := time.NewTimer(budget)
	defer timer.Stop()
	expired := false
	for _, w := range waits {
		if !expired {
			select {
			case res := <-w.ch:
				out[w.image] = answer(res)
				r.c.Metrics.count(registryResult(res))
				continue
			case <-timer.C:
				expired = true
			case <-ctx.Done():
				expired = true
			}
		}
		select {
		case res := <-w.ch:
			// Finished while the deadline fired: still in time to be useful.
			out[w.image] = answer(res)
			r.c.Metrics.count(registryResult(res))
		default:
			if _, queued := r.queued.Load(w.key); queued {
				// Still waiting for a slot: wincompat's load, not the registry's answer.
				out[w.image] = policy.Image{Err: r.busy, Busy: true, Pending: true}
				r.c.Metrics.count(resultBusy)
				continue
			}
			// The same words as a registry that refused the connection: which of the two a host does
			// is what a pod's author would map the network by. The operator's metric says timeout.
			// Pending: the lookup goes on, and a pod gated for it gets its answer from the leader.
			out[w.image] = policy.Image{Err: w.registry + ": " + r.unreachable(fmt.Errorf("no answer within %s", r.c.Timeout)), Pending: true}
			r.c.Metrics.count(resultTimeout)
		}
	}
	return out
}

// Warm starts lookups for req's images that are not cached, without waiting, and returns the cached
// answers (nil when there are none): workload templates are admitted before their pods, and what is
// known already lets a template be warned about an image with no Windows entry.
func (r *Resolver) Warm(req policy.ImageRequest) map[string]policy.Image {
	var out map[string]policy.Image
	creds := r.credentials(req)
	routes := newRouter(req.Mirrors)
	for _, image := range req.Images {
		l, ok := r.parse(image, creds, routes)
		if !ok || l.refusal != "" {
			continue
		}
		img, cached := r.cached(l)
		if !cached {
			r.start(l)
			continue
		}
		if out == nil {
			out = make(map[string]policy.Image, len(req.Images))
		}
		out[image] = img
	}
	return out
}

// Cached returns what is cached for req's images, and starts no lookup: admission in gate mode never
// makes wincompat connect out. An image whose reference is invalid or refused by the egress policy is
// answered so, as Lookup answers it; an image not cached is absent from the map.
func (r *Resolver) Cached(req policy.ImageRequest) map[string]policy.Image {
	out := make(map[string]policy.Image, len(req.Images))
	creds := r.credentials(req)
	routes := newRouter(req.Mirrors)
	for _, image := range req.Images {
		l, ok := r.parse(image, creds, routes)
		switch {
		case !ok:
			out[image] = policy.Image{Err: errInvalid}
		case l.refusal != "":
			out[image] = policy.Image{Err: l.refusal}
		default:
			if img, ok := r.cached(l); ok {
				out[image] = img
				r.c.Metrics.count(cachedResult(img))
			}
		}
	}
	return out
}

// MaxPullSecrets bounds the pod's pull secrets a lookup reads: the kubelet needs one per registry,
// and each is a Secret to get.
const MaxPullSecrets = 8

// credentials are what a request's lookups may use: Config.Keychain (unless KeychainNamespaces leaves
// the namespace out) and the pod's pull secrets (with Config.PodPullSecrets, for an authenticated
// caller).
type credentials struct {
	// key names them in cache and lookup keys: "" for anonymous lookups, and for Config.Keychain
	// when it serves every namespace. Hashed: a pod may list many secrets.
	key       string
	namespace string
	// anonymous: Config.Keychain is not for this namespace.
	anonymous bool
	// secrets are the request's, copied: the lookups outlive the request.
	secrets []string
}

func (r *Resolver) credentials(req policy.ImageRequest) credentials {
	c := credentials{namespace: req.Namespace}
	if r.c.KeychainNamespaces != nil {
		if c.anonymous = !r.c.KeychainNamespaces(req.Namespace); !c.anonymous {
			c.key = "\x00keychain"
		}
	}
	if r.c.PodPullSecrets == nil || len(req.PullSecrets) == 0 || !req.Authenticated {
		return c
	}
	names := slices.Clone(req.PullSecrets[:min(len(req.PullSecrets), MaxPullSecrets)])
	slices.Sort(names)
	names = slices.Compact(names)
	sum := sha256.Sum256([]byte(c.key + "\x00" + req.Namespace + "\x00" + strings.Join(names, "\x00")))
	c.key, c.secrets = "\x00"+hex.EncodeToString(sum[:]), names
	return c
}

func (r *Resolver) parse(image string, creds credentials, routes router) (lookup, bool) {
	if len(image) > maxReference {
		return lookup{}, false
	}
	var p parsed
	if v, ok := r.refs.Get(image); ok {
		p = v.(parsed)
	} else {
		if ref, err := parseReference(image); err == nil {
			p = parsed{ref: ref, name: ref.Name()}
		}
		r.refs.Add(image, p, forever)
	}
	if p.ref == nil {
		return lookup{}, false
	}
	sources, via, refusal := routes.route(p.ref)
	return lookup{ref: p.ref, name: p.name, key: p.name + creds.key + via, creds: creds, sources: sources, refusal: refusal}, true
}

// parseReference reads image as go-containerregistry does, if container runtimes could pull it too:
// containerd and the kubelet parse references with distribution/reference. go-containerregistry alone
// takes "." and ".." for repository components, so "REGISTRY/../x" would be read at a mirror's
// PREFIX/../x, which the mirror resolves outside the repositoryPrefix the operator gave it.
func parseReference(image string) (name.Reference, error) {
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return nil, err
	}
	return name.ParseReference(image)
}

// cached answers from the caches alone.
func (r *Resolver) cached(l lookup) (policy.Image, bool) {
	switch ref := l.ref.(type) {
	case name.Digest:
		if d, ok := r.digests.Get(l.digestKey(ref.DigestStr())); ok {
			return l.image(ref.DigestStr(), slices.Clone(d.(digestEntry).platforms), d.(digestEntry).mirror), true
		}
	case name.Tag:
		if e, ok := r.tags.Get(l.key); ok && r.fresh(e.(tagEntry)) {
			if d, ok := r.digests.Get(e.(tagEntry).key); ok {
				// The tag's answer is whoever said which digest it names: the content is verified.
				return l.image(e.(tagEntry).digest, slices.Clone(d.(digestEntry).platforms), e.(tagEntry).mirror), true
			}
		}
	}
	if msg, ok := r.failures.Get(l.key); ok {
		return policy.Image{Err: msg.(string)}, true
	}
	return policy.Image{}, false
}

// digestKey is the digests entry of digest in l's repository, for l's credentials, whatever the source.
func (l lookup) digestKey(digest string) string {
	return l.ref.Context().Name() + "@" + digest + l.creds.key
}

func (r *Resolver) fresh(e tagEntry) bool {
	return r.c.Now().Sub(e.at) < r.c.TagTTL
}

// start joins the lookup's flight, or starts one. The flight runs in its own goroutine, detached from
// every review, and ends by BackgroundTimeout. Past MaxLookups it ends at once.
func (r *Resolver) start(l lookup) <-chan singleflight.Result {
	return r.flights.DoChan(l.key, func() (any, error) {
		img := r.fetch(l)
		if img.Busy {
			return img, errBusy
		}
		return img, nil
	})
}

// acquire takes a slot for reading from host. A slot is waited for as long as a review waits, no
// longer: a flight still queued then is answered busy. The refusal says nothing of the image, so it is
// not remembered: the next review asks again.
func (r *Resolver) acquire(ctx context.Context, l lookup, host string) bool {
	ctx, cancel := context.WithTimeout(ctx, r.c.Timeout)
	defer cancel()
	ok := r.slots.acquire(ctx, host, func() { r.queued.Store(l.key, struct{}{}) })
	r.queued.Delete(l.key)
	return ok
}

func answer(res singleflight.Result) policy.Image {
	img, _ := res.Val.(policy.Image)
	img.Platforms = slices.Clone(img.Platforms)
	return img
}

func cachedResult(img policy.Image) string {
	if img.Err != "" {
		return resultError
	}
	return resultHit
}

func registryResult(res singleflight.Result) string {
	if errors.Is(res.Err, errBusy) {
		return resultBusy
	}
	if img, _ := res.Val.(policy.Image); img.Err != "" {
		return resultError
	}
	return resultMiss
}

// fetch reads one image from its sources in order, each under a slot of the host it dials, and caches
// the answer, the error included.
func (r *Resolver) fetch(l lookup) (img policy.Image) {
	ctx, cancel := context.WithTimeout(context.Background(), r.c.BackgroundTimeout)
	defer cancel()
	defer func() {
		// A flight's panic would end the process; hostile registry content must not.
		if p := recover(); p != nil {
			r.c.Log.Error(fmt.Errorf("panic: %v", p), "Image lookup panicked", "image", l.name)
			img = policy.Image{Err: "internal error reading the image"}
			r.failures.Add(l.key, img.Err, r.c.NegativeTTL)
		}
	}()
	// The registries' time, not the wait for slots: what the duration metric is for.
	var spent time.Duration
	defer func() {
		if spent > 0 {
			r.c.Metrics.observe(spent)
		}
	}()
	busy := policy.Image{Err: r.busy, Busy: true, Pending: true}
	var failures []sourceFailure
	msg := ""
	for _, src := range l.sources {
		host := src.host()
		if !r.acquire(ctx, l, host) {
			r.c.Log.V(1).Info("Image lookup refused", "image", l.name, "source", src.logLabel(), "answer", r.busy)
			r.c.Metrics.fail(reasonBusy)
			return busy
		}
		img, err := func() (policy.Image, error) {
			// Released even when hostile content panics the read: the recover above answers.
			defer r.slots.release(host)
			began := time.Now()
			defer func() { spent += time.Since(began) }()
			return r.read(withAccount(ctx, &account{budget: r.bytes, host: host}), l, src)
		}()
		if err == nil {
			return img
		}
		var reason string
		msg, reason = r.explain(src.label(), l.creds, err)
		r.c.Metrics.fail(reason)
		if reason == reasonBusy {
			r.c.Log.V(1).Info("Image lookup cut short by the byte budget", "image", l.name, "source", src.logLabel(), "error", err.Error())
			return busy
		}
		// The operator's detail: the pod's author gets msg, which tells network failures apart
		// by nothing.
		r.c.Log.V(1).Info("Image lookup failed", "image", l.name, "source", src.logLabel(), "reason", reason, "error", err.Error(), "answer", msg)
		if src.mirror != "" && reason == reasonPolicy {
			// The operator named this mirror: a refusal is theirs to fix, not a pod author's probe.
			r.c.Log.Info("Registry mirror refused by the egress policy", "mirror", src.mirrorName, "for", src.ns, "error", err.Error())
		}
		failures = append(failures, sourceFailure{label: src.label(), text: strings.TrimPrefix(msg, src.label()+": ")})
		if ctx.Err() != nil {
			break // BackgroundTimeout is spent: the sources left are not tried
		}
	}
	if len(l.sources) > 1 || l.sources[0].mirror != "" {
		msg = failedEverywhere(failures)
	}
	r.failures.Add(l.key, msg, r.c.NegativeTTL)
	return policy.Image{Err: msg}
}

// pullSecretError is a lookup that failed after the pod's pull secrets could not be read.
type pullSecretError struct{ secrets, err error }

func (e *pullSecretError) Error() string {
	return e.err.Error() + " (pod's pull secrets unreadable: " + e.secrets.Error() + ")"
}
func (e *pullSecretError) Unwrap() error { return e.err }

func (r *Resolver) read(ctx context.Context, l lookup, src source) (policy.Image, error) {
	keychain := r.c.Keychain
	if l.creds.anonymous {
		keychain = authn.NewMultiKeychain()
	}
	if l.creds.secrets != nil {
		// Unreadable pull secrets (no RBAC, say) must not fail public images: go on with Config.Keychain,
		// and say why if the registry then refuses.
		pod, err := r.c.PodPullSecrets(ctx, l.creds.namespace, l.creds.secrets)
		if err != nil {
			img, lookupErr := r.readWith(ctx, l, src, keychain)
			if lookupErr != nil {
				lookupErr = &pullSecretError{secrets: err, err: lookupErr}
			}
			return img, lookupErr
		}
		keychain = authn.NewMultiKeychain(pod, keychain)
	}
	return r.readWith(ctx, l, src, keychain)
}

// readWith reads l from src. Caches are keyed by the reference's own repository: a digest's content is
// checked against it wherever it was read, and the tag's entry belongs to l's route.
func (r *Resolver) readWith(ctx context.Context, l lookup, src source, keychain authn.Keychain) (policy.Image, error) {
	repo := l.ref.Context()
	// One session per source: the ping and token exchange serve every request read from it.
	sess, err := r.session(ctx, src.repo, keychain)
	if err != nil {
		return policy.Image{}, err
	}
	sess.ns = src.ns

	ref := l.ref
	tag, isTag := ref.(name.Tag)
	var e any
	if isTag {
		e, _ = r.tags.Get(l.key)
	}
	if e, ok := e.(tagEntry); ok {
		if r.fresh(e) {
			// The digest's platforms were evicted; the tag's digest still holds.
			ref, isTag = repo.Digest(e.digest), false
		} else if digest, err := sess.head(ctx, tag); err == nil {
			// A HEAD is cheaper than a GET and, on Docker Hub, free of the pull rate limit.
			entry := newTagEntry(repo, digest, l.creds.key, src.mirror, r.c.Now())
			r.tags.Add(l.key, entry, forever)
			if d, ok := r.digests.Get(entry.key); ok {
				return l.image(digest, d.(digestEntry).platforms, src.mirror), nil
			}
			ref, isTag = repo.Digest(digest), false
		}
		// A failed HEAD falls through to the GET, whose error says more (HEAD has no body).
	}

	c, digest, err := sess.manifest(ctx, ref)
	if err != nil {
		return policy.Image{}, err
	}
	platforms, err := r.platforms(ctx, sess, repo, c)
	if err != nil {
		return policy.Image{}, err
	}
	r.digests.Add(l.digestKey(digest), digestEntry{platforms: platforms, mirror: src.mirror}, forever)
	if isTag {
		r.tags.Add(l.key, newTagEntry(repo, digest, l.creds.key, src.mirror, r.c.Now()), forever)
	}
	return l.image(digest, platforms, src.mirror), nil
}

// maxNested bounds the child indexes one lookup fetches.
const maxNested = 8

// platforms reads the platforms a manifest's contents c name: an index's entries, nested indexes
// fetched and flattened, or a single image's config.
func (r *Resolver) platforms(ctx context.Context, sess *session, repo name.Repository, c contents) ([]policy.Platform, error) {
	if c.Image {
		raw, err := sess.config(ctx, c.Config)
		if err != nil {
			return nil, err
		}
		p, err := platformFromConfig(raw)
		if err != nil {
			return nil, err
		}
		return []policy.Platform{p}, nil
	}
	var all entries
	for _, p := range c.Platforms {
		all.keep(p)
	}
	all.listed = c.listed
	queue := c.Indexes
	for fetched := 0; len(queue) > 0; fetched++ {
		if fetched == maxNested {
			return nil, malformed("more than %d nested indexes", maxNested)
		}
		digest := repo.Digest(queue[0].String())
		queue = queue[1:]
		cc, _, err := sess.manifest(ctx, digest)
		if err != nil {
			return nil, err
		}
		if cc.Image {
			return nil, malformed("index entry %s is an image, listed as an index", digest.DigestStr())
		}
		listed := all.listed + cc.listed
		if listed > maxPlatforms {
			return nil, malformed("index lists more than %d platforms", maxPlatforms)
		}
		for _, p := range cc.Platforms {
			all.keep(p)
		}
		all.listed = listed
		queue = append(queue, cc.Indexes...)
	}
	if len(all.platforms) == 0 {
		return nil, malformed("image index lists no platforms")
	}
	return all.platforms, nil
}
