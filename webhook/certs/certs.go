// Package certs gives wincompat a serving certificate without cert-manager: the leader keeps a CA and a
// serving certificate in a Secret and the CA bundle of its webhook configurations (mutating, and the validating one for the policy) current; every
// replica serves the certificate from the Secret, reloading it without a restart.
//
// Rotation never breaks a request: the serving certificate is renewed under the same CA, which the API
// server already trusts; a new CA is first added to the webhook's caBundle next to the old one, and only
// on a later pass (once the API server has it) used to sign the serving certificate.
//
// Rotation also revokes: once the new CA signs, the CAs it replaced stay in the bundles for RetireAfter
// only, the time every replica needs to load the serving certificate the new CA signed, and then leave
// every bundle (both webhook configurations and the Secret). See README.md for the bound.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Keys of the Secret.
const (
	keyCACert     = "ca.crt"
	keyCAKey      = "ca.key"
	keyNextCACert = "next-ca.crt" // a new CA already in the caBundle, not yet signing
	keyNextCAKey  = "next-ca.key"
	keyBundle     = "ca-bundle.crt" // every CA the webhook configuration must trust
	keyCert       = corev1.TLSCertKey
	keyKey        = corev1.TLSPrivateKeyKey

	// Annotations on the Secret that force a rotation on the next pass (for operators and tests).
	AnnotationRotateServing = "wincompat.io/rotate-serving-cert"
	AnnotationRotateCA      = "wincompat.io/rotate-ca"
	// RotateCAImmediate as the value of AnnotationRotateCA replaces the CA in one pass, for a CA key
	// known to be compromised: the old CAs leave the bundles at once, at the price of failed calls to
	// replicas until they reload (about ReloadInterval). Any other value rotates without failures.
	RotateCAImmediate = "immediate"
	// When the next CA entered the bundle: it signs only after PromoteAfter, by which time every API
	// server has seen the new caBundle.
	annotationNextCASince = "wincompat.io/next-ca-since"
	// AnnotationCASince records when the Secret's serving certificate was first signed by the current CA:
	// the CAs it replaced leave the bundles RetireAfter later, by which time every replica serves a
	// certificate of the current CA.
	AnnotationCASince = "wincompat.io/ca-since"
)

// Config says what to issue and where to keep it.
type Config struct {
	Namespace         string // of the Secret and the Service
	SecretName        string
	ServiceName       string // the webhook Service; its DNS names go into the certificate
	WebhookConfigName string // the Mutating- and ValidatingWebhookConfiguration of this name: caBundle kept on every webhook in them
	// OwnerConfigMap, when set, names a ConfigMap in Namespace that owns the Secret, so that the garbage
	// collector deletes the Secret (and its CA key) with it: the chart's last-good policy ConfigMap,
	// which goes with the release. While it does not exist the Secret is neither created nor changed, so
	// that a leader still running while the release is uninstalled leaves no Secret behind.
	OwnerConfigMap string
	// ExtraNames are further DNS names or IP addresses for the certificate, for a webhook called by URL
	// (a local demo or test calls https://127.0.0.1:port) rather than through the Service.
	ExtraNames   []string
	CAValidity   time.Duration
	CertValidity time.Duration
	PromoteAfter time.Duration
	// RetireAfter is the overlap of a CA rotation: how long the CAs a new CA replaced stay trusted once
	// the Secret holds a serving certificate of the new CA. Every replica must have reloaded by then, so
	// it is never less than two ReloadIntervals (one failed read to spare).
	RetireAfter time.Duration
	// CheckInterval is how often the leader checks the Secret (a forced rotation waits at most this long);
	// ReloadInterval how often every replica reloads it.
	CheckInterval  time.Duration
	ReloadInterval time.Duration
	// A certificate is renewed once less than a third of its validity is left: "well before expiry".
}

// Defaults fills unset values: ten years for the CA, ninety days for the serving certificate, a minute
// before a new CA signs, before the CAs it replaced leave the bundles, and between checks, two seconds
// between reloads.
func (c *Config) Defaults() {
	if c.CAValidity == 0 {
		c.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if c.CertValidity == 0 {
		c.CertValidity = 90 * 24 * time.Hour
	}
	if c.PromoteAfter == 0 {
		c.PromoteAfter = time.Minute
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = time.Minute
	}
	if c.ReloadInterval == 0 {
		c.ReloadInterval = 2 * time.Second
	}
	if c.RetireAfter == 0 {
		c.RetireAfter = time.Minute
	}
	// A replica that has not reloaded when the old CA leaves fails every call the API server makes to it.
	c.RetireAfter = max(c.RetireAfter, 2*c.ReloadInterval)
}

func (c *Config) dnsNames() []string {
	n, ns := c.ServiceName, c.Namespace
	names := []string{n, n + "." + ns, n + "." + ns + ".svc", n + "." + ns + ".svc.cluster.local"}
	for _, e := range c.ExtraNames {
		if net.ParseIP(e) == nil {
			names = append(names, e)
		}
	}
	return names
}

func (c *Config) ipAddresses() []net.IP {
	var ips []net.IP
	for _, e := range c.ExtraNames {
		if ip := net.ParseIP(e); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// Issuer keeps the Secret and the caBundle current. It runs on the leader.
type Issuer struct {
	Config
	Client   client.Client // reads go to the API server: the Secret is not cached
	Log      logr.Logger
	Interval time.Duration
	Now      func() time.Time // the clock; time.Now when nil

	// due is when the next step of a CA rotation (promotion or retirement) becomes possible, zero when
	// none is pending: Start wakes then instead of a whole Interval later.
	due time.Time
}

// NeedLeaderElection makes the Issuer a leader-only runnable.
func (i *Issuer) NeedLeaderElection() bool { return true }

func (i *Issuer) now() time.Time {
	if i.Now != nil {
		return i.Now()
	}
	return time.Now()
}

// Start reconciles at once, then every Interval, or sooner when a rotation step falls due.
func (i *Issuer) Start(ctx context.Context) error {
	t := time.NewTimer(i.Interval)
	defer t.Stop()
	for {
		if err := i.Reconcile(ctx); err != nil {
			i.Log.Error(err, "keeping the serving certificate")
		}
		t.Reset(i.wait())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// wait is how long until the next pass: Interval, or less when a rotation step falls due sooner. A due
// time already past means the step waits for something else (the caBundle to be applied): Interval.
func (i *Issuer) wait() time.Duration {
	if d := i.due.Sub(i.now()); d > 0 && d < i.Interval {
		return d
	}
	return i.Interval
}

// Reconcile makes one pass: at most one step of a CA rotation, so that the caBundle always reaches the API
// server before a certificate that needs it is served, and every replica serves a certificate of the new
// CA before the old one leaves the caBundle.
func (i *Issuer) Reconcile(ctx context.Context) error {
	now := i.now()
	i.due = time.Time{}
	var s corev1.Secret
	err := i.Client.Get(ctx, client.ObjectKey{Namespace: i.Namespace, Name: i.SecretName}, &s)
	switch {
	case apierrors.IsNotFound(err):
		s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: i.Namespace, Name: i.SecretName}, Type: corev1.SecretTypeTLS}
	case err != nil:
		return fmt.Errorf("reading Secret %s/%s: %w", i.Namespace, i.SecretName, err)
	}
	before := s.DeepCopy()
	if i.OwnerConfigMap != "" {
		if err := i.setOwner(ctx, &s); err != nil {
			return err
		}
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	ca, caErr := parsePair(s.Data[keyCACert], s.Data[keyCAKey])
	next, nextErr := parsePair(s.Data[keyNextCACert], s.Data[keyNextCAKey])
	pending := len(s.Data[keyNextCACert]) > 0
	immediate := s.Annotations[AnnotationRotateCA] == RotateCAImmediate
	switch {
	case caErr != nil || immediate:
		// No usable CA: start from scratch; nothing can be trusted yet, so there is nothing to keep. Or the
		// operator declared the CA keys compromised: the same, a new CA alone in the bundle and signing at
		// once. The pending next CA, if any, goes too: its key sat in the same Secret. Calls fail until the
		// API servers have the new caBundle and the replicas the new certificate; the operator chose that.
		if ca, err = newCA(now, i.CAValidity); err != nil {
			return err
		}
		s.Data[keyCACert], s.Data[keyCAKey] = ca.certPEM, ca.keyPEM
		delete(s.Data, keyNextCACert)
		delete(s.Data, keyNextCAKey)
		delete(s.Annotations, annotationNextCASince)
		delete(s.Annotations, AnnotationRotateCA)
		s.Data[keyBundle] = ca.certPEM
		delete(s.Data, keyCert)
		if immediate {
			i.Log.Info("replaced the CA at once, as annotated: calls to replicas still serving the old certificate fail until they reload", "secret", i.SecretName)
		}
	case pending && nextErr == nil:
		// Step 2 of a CA rotation: the new CA is in the caBundle (step 1 checked it before saving), so it
		// may now sign. The old CA stays in the bundle until every replica serves the new CA's certificate.
		since, err := time.Parse(time.RFC3339Nano, s.Annotations[annotationNextCASince])
		if err != nil || since.After(now) {
			// Unknown since when the API servers may have had it: count from now.
			since = now
			s.Annotations[annotationNextCASince] = now.UTC().Format(time.RFC3339Nano)
		}
		if now.Sub(since) >= i.PromoteAfter && i.bundleApplied(ctx, s.Data[keyBundle]) {
			ca = next
			s.Data[keyCACert], s.Data[keyCAKey] = next.certPEM, next.keyPEM
			delete(s.Data, keyNextCACert)
			delete(s.Data, keyNextCAKey)
			delete(s.Annotations, annotationNextCASince)
			delete(s.Data, keyCert) // reissue under the new CA below
		} else {
			i.due = since.Add(i.PromoteAfter)
		}
	case s.Annotations[AnnotationRotateCA] != "" || renewDue(ca.cert, now) || pending:
		// Step 1: add a new CA to the bundle; it signs from the next pass on. (A pending next CA that does
		// not parse is replaced: the rotation it began would otherwise never finish.)
		next, err := newCA(now, i.CAValidity)
		if err != nil {
			return err
		}
		s.Data[keyNextCACert], s.Data[keyNextCAKey] = next.certPEM, next.keyPEM
		s.Data[keyBundle] = joinPEM(unexpired(s.Data[keyBundle], now), next.certPEM)
		delete(s.Annotations, AnnotationRotateCA)
		s.Annotations[annotationNextCASince] = now.UTC().Format(time.RFC3339Nano)
		i.due = now.Add(i.PromoteAfter)
	}
	s.Data[keyBundle] = joinPEM(unexpired(s.Data[keyBundle], now), s.Data[keyCACert])

	serving, err := parsePair(s.Data[keyCert], s.Data[keyKey])
	underCA := err == nil && serving.cert.CheckSignatureFrom(ca.cert) == nil
	if !underCA || s.Annotations[AnnotationRotateServing] != "" || renewDue(serving.cert, now) ||
		!slices.Equal(serving.cert.DNSNames, i.dnsNames()) ||
		!slices.EqualFunc(serving.cert.IPAddresses, i.ipAddresses(), net.IP.Equal) {
		certPEM, keyPEM, err := newServingCert(ca, i.dnsNames(), i.ipAddresses(), now, i.CertValidity)
		if err != nil {
			return err
		}
		s.Data[keyCert], s.Data[keyKey] = certPEM, keyPEM
		delete(s.Annotations, AnnotationRotateServing)
		if !underCA {
			s.Annotations[AnnotationCASince] = now.UTC().Format(time.RFC3339Nano)
		}
		i.Log.Info("issued a serving certificate", "secret", i.SecretName, "notAfter", now.Add(i.CertValidity).Format(time.RFC3339))
	}
	i.retire(&s, now)

	// The bundle goes to the webhook configuration before the Secret that may need it is saved.
	if err := i.injectBundle(ctx, s.Data[keyBundle]); err != nil {
		return err
	}
	switch {
	case before.ResourceVersion == "":
		return i.Client.Create(ctx, &s)
	case !secretEqual(before, &s):
		return i.Client.Update(ctx, &s)
	}
	return nil
}

// setOwner makes OwnerConfigMap the Secret's owner; a reference to an earlier ConfigMap of that name (a
// reinstall) is replaced, others are kept. No blockOwnerDeletion: nothing waits for the Secret to go, and
// setting it would need the RBAC to update the ConfigMap's finalizers.
func (i *Issuer) setOwner(ctx context.Context, s *corev1.Secret) error {
	var cm corev1.ConfigMap
	if err := i.Client.Get(ctx, client.ObjectKey{Namespace: i.Namespace, Name: i.OwnerConfigMap}, &cm); err != nil {
		return fmt.Errorf("reading ConfigMap %s/%s, the owner of the certificate Secret (the release being uninstalled?): %w", i.Namespace, i.OwnerConfigMap, err)
	}
	return controllerutil.SetOwnerReference(&cm, s, i.Client.Scheme())
}

// retire takes the CAs the current one replaced out of the bundle once the current CA's certificate has
// been in the Secret for RetireAfter: every replica reloads within two ReloadIntervals, so none serves a
// certificate of a retired CA any more. The API server's webhook clients are cached by caBundle, so the
// new bundle makes new clients and new TLS connections, each verifying the certificate served then;
// keep-alive connections verified against the old bundle are not reused for it.
func (i *Issuer) retire(s *corev1.Secret, now time.Time) {
	since, err := time.Parse(time.RFC3339Nano, s.Annotations[AnnotationCASince])
	if err != nil || since.After(now) {
		// No record (a Secret from before it was kept) or one from the future (another leader's clock, an
		// edit): the overlap starts now, never shorter than RetireAfter.
		since = now
		s.Annotations[AnnotationCASince] = now.UTC().Format(time.RFC3339Nano)
	}
	kept := onlyCerts(s.Data[keyBundle], s.Data[keyCACert], s.Data[keyNextCACert])
	if bytes.Equal(kept, s.Data[keyBundle]) {
		return // nothing to retire
	}
	if now.Sub(since) < i.RetireAfter {
		if d := since.Add(i.RetireAfter); i.due.IsZero() || d.Before(i.due) {
			i.due = d
		}
		return
	}
	s.Data[keyBundle] = kept
	i.Log.Info("retired the CAs the current one replaced from the caBundle", "secret", i.SecretName, "signingSince", since.Format(time.RFC3339))
}

// ownConfigurations are wincompat's webhook configurations, both named WebhookConfigName: the mutating
// one, and the validating one that checks the policy ConfigMap (absent in older installations).
func (i *Issuer) ownConfigurations(ctx context.Context) ([]client.Object, error) {
	var out []client.Object
	for _, wc := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		err := i.Client.Get(ctx, client.ObjectKey{Name: i.WebhookConfigName}, wc)
		switch {
		case apierrors.IsNotFound(err):
			i.Log.V(1).Info("webhook configuration not found; caBundle not set", "kind", fmt.Sprintf("%T", wc), "name", i.WebhookConfigName)
		case err != nil:
			return nil, err
		default:
			out = append(out, wc)
		}
	}
	return out, nil
}

// clientConfigs are the clientConfig of every webhook in a configuration.
func clientConfigs(wc client.Object) []*admissionregistrationv1.WebhookClientConfig {
	var out []*admissionregistrationv1.WebhookClientConfig
	switch wc := wc.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for j := range wc.Webhooks {
			out = append(out, &wc.Webhooks[j].ClientConfig)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for j := range wc.Webhooks {
			out = append(out, &wc.Webhooks[j].ClientConfig)
		}
	}
	return out
}

// bundleApplied reports whether every webhook of ours already trusts bundle.
func (i *Issuer) bundleApplied(ctx context.Context, bundle []byte) bool {
	wcs, err := i.ownConfigurations(ctx)
	if err != nil || len(wcs) == 0 {
		return false
	}
	for _, wc := range wcs {
		for _, cc := range clientConfigs(wc) {
			if !bytes.Equal(cc.CABundle, bundle) {
				return false
			}
		}
	}
	return true
}

// injectBundle sets caBundle on every webhook of our configurations.
func (i *Issuer) injectBundle(ctx context.Context, bundle []byte) error {
	wcs, err := i.ownConfigurations(ctx)
	if err != nil {
		return err
	}
	for _, wc := range wcs {
		changed := false
		for _, cc := range clientConfigs(wc) {
			if !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle = bundle
				changed = true
			}
		}
		if !changed {
			continue
		}
		if err := i.Client.Update(ctx, wc); err != nil {
			return err
		}
		i.Log.Info("updated the webhook caBundle", "kind", fmt.Sprintf("%T", wc), "name", i.WebhookConfigName)
	}
	return nil
}

func secretEqual(a, b *corev1.Secret) bool {
	if len(a.Data) != len(b.Data) || len(a.Annotations) != len(b.Annotations) ||
		!equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) {
		return false
	}
	for k, v := range a.Data {
		if !bytes.Equal(v, b.Data[k]) {
			return false
		}
	}
	for k, v := range a.Annotations {
		if b.Annotations[k] != v {
			return false
		}
	}
	return true
}

// renewDue is true once less than a third of the certificate's validity is left.
func renewDue(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return now.After(c.NotAfter.Add(-life / 3))
}

type pair struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

func parsePair(certPEM, keyPEM []byte) (pair, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return pair{}, errors.New("missing PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return pair{}, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return pair{}, err
	}
	return pair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

func newCA(now time.Time, validity time.Duration) (pair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "wincompat-ca", Organization: []string{"wincompat"}},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew between nodes
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, nil)
}

func newServingCert(ca pair, dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) ([]byte, []byte, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[2]},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	p, err := sign(tmpl, &ca)
	return p.certPEM, p.keyPEM, err
}

// sign creates a key and a certificate from tmpl, signed by parent (self-signed when nil).
func sign(tmpl *x509.Certificate, parent *pair) (pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return pair{}, err
	}
	tmpl.SerialNumber = serial
	issuerCert, issuerKey := tmpl, key
	if parent != nil {
		issuerCert, issuerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuerCert, &key.PublicKey, issuerKey)
	if err != nil {
		return pair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return pair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return pair{}, err
	}
	return pair{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// unexpired keeps the certificates of a PEM bundle that are still valid at now.
func unexpired(bundle []byte, now time.Time) []byte {
	return filterPEM(bundle, func(b *pem.Block) bool {
		c, err := x509.ParseCertificate(b.Bytes)
		return err == nil && now.Before(c.NotAfter)
	})
}

// onlyCerts keeps the certificates of a PEM bundle that are among certs (PEM, compared by their DER).
func onlyCerts(bundle []byte, certs ...[]byte) []byte {
	var want [][]byte
	for _, c := range certs {
		if b, _ := pem.Decode(c); b != nil {
			want = append(want, b.Bytes)
		}
	}
	return filterPEM(bundle, func(b *pem.Block) bool {
		return slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, b.Bytes) })
	})
}

// filterPEM keeps the blocks of a PEM bundle that keep accepts.
func filterPEM(bundle []byte, keep func(*pem.Block) bool) []byte {
	var out []byte
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return out
		}
		if keep(b) {
			out = append(out, pem.EncodeToMemory(b)...)
		}
	}
}

// joinPEM appends cert to bundle unless the bundle already holds it.
func joinPEM(bundle, cert []byte) []byte {
	if bytes.Contains(bundle, cert) {
		return bundle
	}
	return append(append([]byte{}, bundle...), cert...)
}

// Loader serves the Secret's certificate on every replica, reloading it when it changes.
type Loader struct {
	Reader     client.Reader
	Namespace  string
	SecretName string
	Interval   time.Duration
	Log        logr.Logger
	current    atomic.Pointer[tls.Certificate]
	lastPEM    []byte
}

// NeedLeaderElection is false: every replica serves.
func (l *Loader) NeedLeaderElection() bool { return false }

// Start loads the certificate now and then every Interval.
func (l *Loader) Start(ctx context.Context) error {
	t := time.NewTicker(l.Interval)
	defer t.Stop()
	for {
		l.load(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (l *Loader) load(ctx context.Context) {
	var s corev1.Secret
	if err := l.Reader.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.SecretName}, &s); err != nil {
		if !apierrors.IsNotFound(err) {
			l.Log.Error(err, "reading the serving certificate Secret")
		}
		return
	}
	if bytes.Equal(s.Data[keyCert], l.lastPEM) {
		return
	}
	cert, err := tls.X509KeyPair(s.Data[keyCert], s.Data[keyKey])
	if err != nil {
		l.Log.Error(err, "the serving certificate Secret holds no valid key pair; keeping the current one")
		return
	}
	l.current.Store(&cert)
	l.lastPEM = s.Data[keyCert]
	l.Log.Info("loaded the serving certificate", "secret", l.SecretName)
}

// GetCertificate is tls.Config.GetCertificate.
func (l *Loader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := l.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet: the leader has not issued one")
}

// Ready reports whether a certificate is loaded, for /readyz.
func (l *Loader) Ready() bool { return l.current.Load() != nil }
