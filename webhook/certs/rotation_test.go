package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The tests below drive one Issuer (the leader), several Loaders (the replicas, each reloading on its own
// schedule) and a clock by hand. After every step, each replica is called the way an API server would
// call it: a TLS handshake trusting only a caBundle of the webhook configurations, the current one and
// the one an API server whose watch lags behind still has. None of these calls may fail unless the
// operator asked for an immediate rotation.

const (
	testNamespace = "wincompat-system"
	testSecret    = "wincompat-tls"
	testService   = "wincompat"
	testWebhooks  = "wincompat"
	// step is the resolution of the simulated time; apiLag how late an API server sees a configuration.
	step   = 500 * time.Millisecond
	apiLag = time.Second
)

type replica struct {
	l            *Loader
	every, phase time.Duration
	next         time.Time
}

type rig struct {
	t        *testing.T
	ctx      context.Context
	now      time.Time
	c        client.Client
	iss      *Issuer
	nextPass time.Time
	replicas []*replica
	// seen is every caBundle the webhook configurations held, with when they started holding it.
	seen []seenBundle
	// verified caches handshakes already made: the outcome depends only on the certificate and the bundle
	// while neither expires within a test.
	verified map[[2]string]bool
}

type seenBundle struct {
	since  time.Time
	bundle []byte
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	cfg.Namespace, cfg.SecretName, cfg.ServiceName, cfg.WebhookConfigName = testNamespace, testSecret, testService, testWebhooks
	cfg.Defaults()
	service := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: testNamespace, Name: testService, Path: &path}}
	}
	// envtest's CA stands for whatever the configurations trusted before wincompat took over.
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: testWebhooks}, Webhooks: []admissionregistrationv1.MutatingWebhook{
		{Name: "pods.wincompat.io", ClientConfig: service("/mutate-pod")},
		{Name: "workloads.wincompat.io", ClientConfig: service("/mutate-workload")},
	}}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: testWebhooks}, Webhooks: []admissionregistrationv1.ValidatingWebhook{
		{Name: "policy.wincompat.io", ClientConfig: service("/validate-policy")},
	}}
	r := &rig{
		t: t, ctx: context.Background(), now: time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC),
		c:        fake.NewClientBuilder().WithObjects(mwc, vwc).Build(),
		verified: map[[2]string]bool{},
	}
	r.iss = &Issuer{Config: cfg, Client: r.c, Log: logr.Discard(), Interval: cfg.CheckInterval, Now: func() time.Time { return r.now }}
	// Replicas read the Secret at different phases of ReloadInterval, and one misses every other read (a
	// failed Get): RetireAfter must cover that one too.
	for _, sched := range []struct{ every, phase time.Duration }{
		{cfg.ReloadInterval, 0}, {cfg.ReloadInterval, cfg.ReloadInterval - step}, {2 * cfg.ReloadInterval, step},
	} {
		l := &Loader{Reader: r.c, Namespace: testNamespace, SecretName: testSecret, Interval: sched.every, Log: logr.Discard()}
		r.replicas = append(r.replicas, &replica{l: l, every: sched.every, phase: sched.phase, next: r.now.Add(sched.phase)})
	}
	r.pass()
	for _, rep := range r.replicas {
		rep.l.load(r.ctx)
	}
	r.check()
	return r
}

// pass is one pass of the Issuer, scheduled the way Start schedules the next one.
func (r *rig) pass() {
	r.t.Helper()
	if err := r.iss.Reconcile(r.ctx); err != nil {
		r.t.Fatalf("pass at %s: %v", r.now.Format(time.TimeOnly), err)
	}
	r.nextPass = r.now.Add(r.iss.wait())
	if b := r.webhookBundle(); len(r.seen) == 0 || !bytes.Equal(r.seen[len(r.seen)-1].bundle, b) {
		r.seen = append(r.seen, seenBundle{since: r.now, bundle: b})
	}
}

// tick advances the clock one step: the Issuer's pass if due, then the replicas' reloads if due.
func (r *rig) tick() {
	r.t.Helper()
	r.now = r.now.Add(step)
	if !r.now.Before(r.nextPass) {
		r.pass()
	}
	for _, rep := range r.replicas {
		if !r.now.Before(rep.next) {
			rep.l.load(r.ctx)
			rep.next = rep.next.Add(rep.every)
		}
	}
}

// runUntil ticks, checking every call after each tick, until cond holds; it fails after limit.
func (r *rig) runUntil(what string, limit time.Duration, cond func() bool) time.Duration {
	r.t.Helper()
	start := r.now
	for !cond() {
		if r.now.Sub(start) > limit {
			r.t.Fatalf("%s did not happen within %s", what, limit)
		}
		r.tick()
		r.check()
	}
	return r.now.Sub(start)
}

func (r *rig) runFor(d time.Duration) {
	r.t.Helper()
	end := r.now.Add(d)
	r.runUntil("time passing", d+step, func() bool { return !r.now.Before(end) })
}

// jump moves the clock far ahead as if everything had run in between: one pass, every replica reloaded.
// (Serving-certificate renewals under one CA are covered by TestServingRenewalKeepsTheBundle.)
func (r *rig) jump(d time.Duration) {
	r.t.Helper()
	r.now = r.now.Add(d)
	r.pass()
	for _, rep := range r.replicas {
		rep.l.load(r.ctx)
		rep.next = r.now.Add(rep.phase)
	}
	r.seen = r.seen[len(r.seen)-1:]
	r.check()
}

// check calls every replica as the API servers would: one with the configurations as they are, one that
// still has them as they were apiLag ago.
func (r *rig) check() {
	r.t.Helper()
	for _, b := range r.apiServerBundles() {
		for n, rep := range r.replicas {
			if err := r.handshake(rep.l, b); err != nil {
				r.t.Fatalf("at %s an API server could not call replica %d: %v\nbundle:\n%s", r.now.Format(time.DateTime), n, err, describe(b))
			}
		}
	}
}

// apiServerBundles are the caBundles some API server may be using now.
func (r *rig) apiServerBundles() [][]byte {
	out := [][]byte{r.webhookBundle()}
	for j := len(r.seen) - 1; j >= 0; j-- {
		if !r.seen[j].since.After(r.now.Add(-apiLag)) {
			if !bytes.Equal(r.seen[j].bundle, out[0]) {
				out = append(out, r.seen[j].bundle)
			}
			break
		}
	}
	return out
}

// handshake is a TLS handshake with the replica, trusting only bundle, at the rig's time.
func (r *rig) handshake(l *Loader, bundle []byte) error {
	cert, err := l.GetCertificate(nil)
	if err != nil {
		return err
	}
	key := [2]string{string(cert.Certificate[0]), string(bundle)}
	if r.verified[key] {
		return nil
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	cconn, sconn := net.Pipe()
	defer cconn.Close()
	defer sconn.Close()
	srv := tls.Server(sconn, &tls.Config{GetCertificate: l.GetCertificate, MinVersion: tls.VersionTLS13})
	served := make(chan error, 1)
	go func() { served <- srv.HandshakeContext(r.ctx) }()
	cl := tls.Client(cconn, &tls.Config{RootCAs: roots, ServerName: testService + "." + testNamespace + ".svc", MinVersion: tls.VersionTLS13, Time: func() time.Time { return r.now }})
	err = cl.HandshakeContext(r.ctx)
	cconn.Close() // a refused handshake leaves the server waiting for the client's next message
	<-served
	if err == nil {
		r.verified[key] = true
	}
	return err
}

func (r *rig) secret() *corev1.Secret {
	r.t.Helper()
	var s corev1.Secret
	if err := r.c.Get(r.ctx, client.ObjectKey{Namespace: testNamespace, Name: testSecret}, &s); err != nil {
		r.t.Fatal(err)
	}
	return &s
}

func (r *rig) annotate(key, value string) {
	r.t.Helper()
	s := r.secret()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[key] = value
	if err := r.c.Update(r.ctx, s); err != nil {
		r.t.Fatal(err)
	}
}

// bundles are every bundle of trust: each webhook's caBundle in both configurations, and the Secret's.
func (r *rig) bundles() map[string][]byte {
	r.t.Helper()
	out := map[string][]byte{"Secret " + keyBundle: r.secret().Data[keyBundle]}
	var m admissionregistrationv1.MutatingWebhookConfiguration
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := r.c.Get(r.ctx, client.ObjectKey{Name: testWebhooks}, &m); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.Get(r.ctx, client.ObjectKey{Name: testWebhooks}, &v); err != nil {
		r.t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		out["MutatingWebhookConfiguration "+w.Name] = w.ClientConfig.CABundle
	}
	for _, w := range v.Webhooks {
		out["ValidatingWebhookConfiguration "+w.Name] = w.ClientConfig.CABundle
	}
	return out
}

// webhookBundle is the one caBundle of every webhook; it fails the test when they differ.
func (r *rig) webhookBundle() []byte {
	r.t.Helper()
	var first []byte
	for where, b := range r.bundles() {
		if first == nil {
			first = b
		}
		if !bytes.Equal(b, first) {
			r.t.Fatalf("%s holds another bundle than the rest:\n%s", where, describe(b))
		}
	}
	return first
}

// trusts reports whether every bundle holds exactly the CAs given (PEM).
func (r *rig) trustsExactly(cas ...[]byte) bool {
	r.t.Helper()
	b := r.webhookBundle()
	if len(certsIn(b)) != len(cas) {
		return false
	}
	for _, ca := range cas {
		if !holds(b, ca) {
			return false
		}
	}
	return true
}

func certsIn(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

func holds(bundle, caPEM []byte) bool {
	want := certsIn(caPEM)
	for _, c := range certsIn(bundle) {
		if len(want) == 1 && c.Equal(want[0]) {
			return true
		}
	}
	return false
}

func describe(bundle []byte) string {
	var s string
	for _, c := range certsIn(bundle) {
		s += "  " + c.Subject.CommonName + " serial " + c.SerialNumber.String() + "\n"
	}
	return s
}

func signedBy(certPEM, caPEM []byte) bool {
	c, ca := certsIn(certPEM), certsIn(caPEM)
	return len(c) == 1 && len(ca) == 1 && c[0].CheckSignatureFrom(ca[0]) == nil
}

// rotation follows one CA rotation from the moment it starts (the annotation, or the CA's renewal
// falling due) to its end: the new CA trusted next to the old one, then signing, then alone. It returns
// how long the old CA stayed trusted.
func (r *rig) rotation(oldCA []byte) time.Duration {
	r.t.Helper()
	cfg := r.iss.Config
	limit := 2*cfg.CheckInterval + cfg.PromoteAfter + cfg.RetireAfter

	var newCA []byte
	start := r.now
	r.runUntil("the new CA entering the bundles", 2*cfg.CheckInterval, func() bool {
		newCA = r.secret().Data[keyNextCACert]
		return len(certsIn(newCA)) == 1
	})
	if !r.trustsExactly(oldCA, newCA) {
		r.t.Fatalf("step 1: the bundles should hold the old and the new CA:\n%s", describe(r.webhookBundle()))
	}
	if s := r.secret(); !signedBy(s.Data[keyCert], oldCA) {
		r.t.Fatal("step 1: the new CA signed before the API servers trusted it")
	}

	r.runUntil("the new CA signing", cfg.PromoteAfter+2*cfg.CheckInterval, func() bool {
		return bytes.Equal(r.secret().Data[keyCACert], newCA)
	})
	if s := r.secret(); !signedBy(s.Data[keyCert], newCA) {
		r.t.Error("the serving certificate of the old CA was not reissued in the pass that made the new CA sign")
	}
	if !r.trustsExactly(oldCA, newCA) {
		r.t.Fatalf("step 2: the old CA left the bundles while replicas may still serve its certificate:\n%s", describe(r.webhookBundle()))
	}

	r.runUntil("the old CA leaving every bundle", limit, func() bool { return r.trustsExactly(newCA) })
	took := r.now.Sub(start)
	for _, rep := range r.replicas {
		cert, _ := rep.l.GetCertificate(nil)
		if !signedBy(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), newCA) {
			r.t.Error("a replica serves a certificate of a CA no bundle holds")
		}
	}
	// And it stays gone.
	r.runFor(3 * cfg.CheckInterval)
	if !r.trustsExactly(newCA) {
		r.t.Errorf("a retired CA came back:\n%s", describe(r.webhookBundle()))
	}
	return took
}

// TestRotateCARevokesTheOldCA: wincompat.io/rotate-ca (say, a suspected leak of the CA key) takes the
// old CA out of both webhook configurations and the Secret within the documented bound, and no call
// fails on the way.
func TestRotateCARevokesTheOldCA(t *testing.T) {
	r := newRig(t, Config{})
	r.runFor(10 * time.Second)
	oldCA := r.secret().Data[keyCACert]
	if !r.trustsExactly(oldCA) {
		t.Fatalf("a fresh installation should trust its one CA:\n%s", describe(r.webhookBundle()))
	}
	r.annotate(AnnotationRotateCA, "suspected leak")
	took := r.rotation(oldCA)
	// The documented bound: the Issuer notices the annotation within CheckInterval, the new CA signs
	// PromoteAfter later and the old one leaves RetireAfter after that (the Issuer wakes for each step).
	cfg := r.iss.Config
	if bound := cfg.CheckInterval + cfg.PromoteAfter + cfg.RetireAfter + 3*step; took > bound {
		t.Errorf("the old CA stayed trusted %s after the annotation; documented: at most %s", took, bound)
	}
	t.Logf("old CA trusted %s after rotate-ca (CheckInterval %s, PromoteAfter %s, RetireAfter %s)", took, cfg.CheckInterval, cfg.PromoteAfter, cfg.RetireAfter)
}

// TestCARenewalRevokesTheOldCA: the CA's own renewal, with a third of its validity left, ends the same
// way: the old CA does not stay trusted for the years it has left.
func TestCARenewalRevokesTheOldCA(t *testing.T) {
	r := newRig(t, Config{CAValidity: 30 * 24 * time.Hour, CertValidity: 3 * 24 * time.Hour})
	oldCA := r.secret().Data[keyCACert]
	// Nineteen days on, the CA has more than a third of its validity left: nothing to do yet.
	r.jump(19 * 24 * time.Hour)
	if r.secret().Data[keyNextCACert] != nil || !r.trustsExactly(oldCA) {
		t.Fatal("the CA was renewed early")
	}
	r.jump(24 * time.Hour)
	took := r.rotation(oldCA)
	cfg := r.iss.Config
	if bound := cfg.PromoteAfter + cfg.RetireAfter + 2*step; took > bound {
		t.Errorf("the old CA stayed trusted %s after its renewal began; documented: at most %s", took, bound)
	}
}

// TestRetireAfterCoversEveryReload: however short the overlap is configured, it is never shorter than
// two reloads, so a replica that missed one read still serves a trusted certificate (the rig's third
// replica reads every other time, and check calls it after every step).
func TestRetireAfterCoversEveryReload(t *testing.T) {
	cfg := Config{ReloadInterval: 2 * time.Second, RetireAfter: time.Nanosecond, PromoteAfter: 5 * time.Second, CheckInterval: 5 * time.Second}
	r := newRig(t, cfg)
	if got := r.iss.RetireAfter; got != 4*time.Second {
		t.Fatalf("RetireAfter %s: want two ReloadIntervals, 4s", got)
	}
	oldCA := r.secret().Data[keyCACert]
	r.annotate(AnnotationRotateCA, "yes")
	r.rotation(oldCA)
}

// TestRotateCAImmediately: the break-glass value drops the old CA in one pass, without an overlap. The
// price, which the operator chose, is that a replica still serving the old CA's certificate fails until
// it reloads; once every replica has, calls succeed again.
func TestRotateCAImmediately(t *testing.T) {
	r := newRig(t, Config{})
	r.runFor(10 * time.Second)
	oldCA := r.secret().Data[keyCACert]
	r.annotate(AnnotationRotateCA, RotateCAImmediate)
	r.now = r.nextPass
	r.pass()
	s := r.secret()
	newCA := s.Data[keyCACert]
	if bytes.Equal(newCA, oldCA) || !r.trustsExactly(newCA) {
		t.Fatalf("after one pass the bundles should hold only a new CA:\n%s", describe(r.webhookBundle()))
	}
	if !signedBy(s.Data[keyCert], newCA) || s.Data[keyNextCACert] != nil || s.Annotations[AnnotationRotateCA] != "" {
		t.Fatal("the immediate rotation left a certificate of the old CA, a pending CA or the annotation behind")
	}
	if err := r.handshake(r.replicas[0].l, r.webhookBundle()); err == nil {
		t.Fatal("a replica serving the old certificate was still trusted: the old CA was not revoked")
	}
	for _, rep := range r.replicas {
		rep.l.load(r.ctx)
	}
	r.seen = r.seen[len(r.seen)-1:] // every API server has the new bundle
	r.check()
	r.runFor(3 * time.Minute)
	if !r.trustsExactly(newCA) {
		t.Errorf("the bundles changed after an immediate rotation:\n%s", describe(r.webhookBundle()))
	}
}

// TestServingRenewalKeepsTheBundle: renewing the serving certificate under the same CA changes no bundle.
func TestServingRenewalKeepsTheBundle(t *testing.T) {
	r := newRig(t, Config{})
	ca, before := r.secret().Data[keyCACert], r.secret().Data[keyCert]
	r.annotate(AnnotationRotateServing, "now")
	r.runUntil("a new serving certificate", 2*r.iss.CheckInterval, func() bool { return !bytes.Equal(r.secret().Data[keyCert], before) })
	r.runFor(r.iss.RetireAfter + r.iss.CheckInterval)
	if !r.trustsExactly(ca) {
		t.Errorf("renewing the serving certificate changed the bundles:\n%s", describe(r.webhookBundle()))
	}
}

// TestOldCAsFromBeforeAreRetiredWithTheOverlap: a Secret written before the current CA's start was
// recorded (an upgrade from a version that kept old CAs until expiry), or with a start in the future
// (another leader's clock, an edit), still gets its old CAs retired, after a whole overlap.
func TestOldCAsFromBeforeAreRetiredWithTheOverlap(t *testing.T) {
	for name, since := range map[string]string{"no record": "", "record in the future": "2036-01-01T00:00:00Z", "garbage": "\x1b[31m"} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, Config{})
			ca := r.secret().Data[keyCACert]
			old, err := newCA(r.now.Add(-400*24*time.Hour), 10*365*24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			s := r.secret()
			s.Data[keyBundle] = joinPEM(old.certPEM, ca)
			if since == "" {
				delete(s.Annotations, AnnotationCASince)
			} else {
				s.Annotations[AnnotationCASince] = since
			}
			if err := r.c.Update(r.ctx, s); err != nil {
				t.Fatal(err)
			}
			r.now = r.nextPass
			r.pass()
			if !r.trustsExactly(old.certPEM, ca) {
				t.Fatalf("the old CA left before an overlap passed:\n%s", describe(r.webhookBundle()))
			}
			took := r.runUntil("the old CA leaving the bundles", 2*r.iss.RetireAfter, func() bool { return r.trustsExactly(ca) })
			if took < r.iss.RetireAfter-step {
				t.Errorf("the old CA left after %s, before the overlap of %s", took, r.iss.RetireAfter)
			}
		})
	}
}

// TestPendingCAThatDoesNotParseIsReplaced: a rotation whose next CA was damaged (an edit) starts over
// instead of waiting forever, and still trusts the new CA before it signs.
func TestPendingCAThatDoesNotParseIsReplaced(t *testing.T) {
	r := newRig(t, Config{})
	oldCA := r.secret().Data[keyCACert]
	s := r.secret()
	s.Data[keyNextCACert], s.Data[keyNextCAKey] = []byte("not a certificate"), []byte("not a key")
	if err := r.c.Update(r.ctx, s); err != nil {
		t.Fatal(err)
	}
	r.rotation(oldCA)
}
