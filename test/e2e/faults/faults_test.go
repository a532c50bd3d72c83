package faults

// Issue 8, faults under load: a steady stream of Windows pod creations through the real kube-apiserver,
// served by two real `wincompat serve` processes behind a TCP load balancer, while the test rotates the
// serving certificate, kills and restarts a replica (SIGTERM, then SIGKILL), changes the policy file
// (valid, then invalid) and restarts the API server. Each phase reports what the creators saw.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/lab/perf/load"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestFaultsUnderLoad: issue 8, "faults under a steady stream of pod creations".
func TestFaultsUnderLoad(t *testing.T) {
	ctx := context.Background()
	cl := e2eutil.NewCluster(t)
	e2eutil.RequireAdmissionPolicies(t, cl.Cfg) // phase e' rolls the replicas to hybrid
	host := cl.Webhook.Host

	// The serving certificate as cert-manager would keep it: our own CA (so that the test can sign a
	// renewal with the same CA), the files in a Secret volume shared by both replicas.
	ca, caKey, caPEM, _ := e2eutil.Issue(t, nil, nil, host)
	_, _, cert1, key1 := e2eutil.Issue(t, ca, caKey, host)
	certs := newProjectedDir(t, "certs")
	certs.write(t, map[string][]byte{"tls.crt": cert1, "tls.key": key1})
	var wc admissionregistrationv1.MutatingWebhookConfiguration
	if err := cl.C.Get(ctx, client.ObjectKey{Name: e2eutil.WebhookConfigName}, &wc); err != nil {
		t.Fatal(err)
	}
	for i := range wc.Webhooks {
		wc.Webhooks[i].ClientConfig.CABundle = caPEM
	}
	if err := cl.C.Update(ctx, &wc); err != nil {
		t.Fatal(err)
	}
	// The policy as the chart's ConfigMap volume holds it.
	policies := newProjectedDir(t, "policy")
	policies.write(t, map[string][]byte{"policy.yaml": []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\n")})

	e2eutil.SetUpNamespace(ctx, t, cl.C, e2eutil.OwnNamespace, nil, nil) // the leader Lease
	e2eutil.SetUpNamespace(ctx, t, cl.C, e2eutil.FaultNS, map[string]string{policy.LabelEnabled: "true"}, nil)
	// One Windows build in the cluster: the stream's pods name none in their image, so they get this
	// one (build-source cluster) as long as wincompat's node inventory is current.
	cl.AddNode(t, e2eutil.TestNode{Name: "linux-0", OS: "linux", Build: ""})
	cl.AddNode(t, e2eutil.TestNode{Name: "win-a", OS: "windows", Build: e2eutil.Build2019})

	// Two replicas, with the chart's flags (deploy/helm/wincompat/templates/deployment.yaml), each on
	// its own ports as two pods would have their own IPs.
	bin := e2eutil.BuildWincompat(t)
	kubeconfig := e2eutil.WriteKubeConfig(t, cl, "wincompat", "system:masters")
	replicas := []*e2eutil.Replica{
		newReplica(t, 0, bin, kubeconfig, certs.dir, filepath.Join(policies.dir, "policy.yaml")),
		newReplica(t, 1, bin, kubeconfig, certs.dir, filepath.Join(policies.dir, "policy.yaml")),
	}
	for _, r := range replicas {
		r.Start(t)
	}
	for _, r := range replicas {
		r.WaitReady(t)
	}
	// The balancer takes the address the API server calls (envtest pointed the webhook configuration's
	// URL there), as a Service's cluster IP would.
	lb := startBalancer(t, net.JoinHostPort(host, strconv.Itoa(cl.Webhook.Port)), replicas)

	cfg := rest.CopyConfig(cl.Cfg)
	cfg.QPS = -1 // no client-side rate limit: the stream's pace is its own
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := &expectation{build: e2eutil.Build2019, toleration: "windows"}
	waitForPods(t, cs, want)

	s := startStream(cs, lb, want, e2eutil.FaultCreators, e2eutil.FaultInterval)
	defer s.close() // also on a fatal error, before the cleanups stop what the creators call
	var phases []*streamPhase
	begin := func(name string) *streamPhase {
		p := s.begin(name)
		phases = append(phases, p)
		return p
	}

	steady := begin("steady")
	time.Sleep(3 * time.Second)

	// a. The serving certificate renewed in the Secret volume: same CA, new key and certificate, both
	// files replaced at once.
	rotation := begin("a. certificate rotation")
	renewed, _, cert2, key2 := e2eutil.Issue(t, ca, caKey, host)
	served := func(r *e2eutil.Replica) string {
		return e2eutil.ServedSerial(t, &e2eutil.Cluster{Webhook: controlplane.Webhook{Host: host, Port: r.Port}}, caPEM)
	}
	certs.write(t, map[string][]byte{"tls.crt": cert2, "tls.key": key2})
	rotatedIn := map[int]time.Duration{}
	for _, r := range replicas {
		rotatedIn[r.Index] = e2eutil.WaitUntil(t, 30*time.Second, fmt.Sprintf("replica %d serving the renewed certificate", r.Index), func() bool {
			return served(r) == renewed.SerialNumber.String()
		})
	}
	rotation.note("the renewed certificate served by replica 0 after %s, replica 1 after %s",
		rotatedIn[0].Round(10*time.Millisecond), rotatedIn[1].Round(10*time.Millisecond))
	// The API server keeps its connections, made with the old certificate, for as long as they stay
	// open; how many more a burst needs depends on timing. So, with no creation in flight, the balancer
	// closes every connection (as when the idle ones time out) and the API server must open new ones,
	// which see the renewed certificate.
	time.Sleep(time.Second)
	resume := s.pause()
	closed := lb.closeAll()
	time.Sleep(200 * time.Millisecond) // the API server's transport sees the FINs and drops those connections
	resume()
	conns := lb.connections()
	s.burst(3 * e2eutil.FaultCreators)
	if opened := sum(lb.connections()) - sum(conns); opened == 0 {
		t.Error("the burst opened no new connection to wincompat: the renewed certificate was not used by the API server")
	} else {
		rotation.note("with its %d connections closed while idle, a burst of %d creations opened %d new ones, with the renewed certificate",
			closed, 3*e2eutil.FaultCreators, opened)
	}
	time.Sleep(2 * time.Second)

	// b. A replica deleted: its endpoint leaves the Service as the kubelet sends SIGTERM (the
	// EndpointSlice controller and the kubelet both act on the pod's deletion); it finishes the reviews
	// in flight and exits; a new one starts and is taken in once ready.
	// In both variants the signal comes in the middle of a burst of creations, so that reviews are in
	// flight on the replica (and on connections to it) when it comes.
	inBurst := func(signal func()) {
		done := make(chan struct{})
		go func() { s.burst(3 * e2eutil.FaultCreators); close(done) }()
		time.Sleep(15 * time.Millisecond) // the API server is calling the webhook
		signal()
		<-done
	}
	graceful := begin("b. replica 0 SIGTERM, restarted")
	time.Sleep(time.Second)
	var stopped time.Time
	inBurst(func() {
		lb.drain(replicas[0], true)
		stopped = time.Now()
		if err := replicas[0].Stop(30 * time.Second); err != nil {
			t.Errorf("replica 0 on SIGTERM: %v", err)
		}
		graceful.note("replica 0 exited %s after SIGTERM", time.Since(stopped).Round(10*time.Millisecond))
	})
	time.Sleep(time.Second) // one replica serves alone
	replicas[0].Start(t)
	replicas[0].WaitReady(t)
	lb.drain(replicas[0], false)
	e2eutil.WaitUntil(t, 10*time.Second, "the balancer to take replica 0 back", func() bool { return lb.ready(replicas[0]) })
	time.Sleep(2 * time.Second)

	// b'. A replica killed (OOM killer, node failure): nothing finishes, the balancer learns from the
	// failing readiness probe; the kubelet restarts the container.
	killed := begin("b'. replica 1 SIGKILL, restarted")
	time.Sleep(time.Second)
	var killedAt time.Time
	inBurst(func() {
		killedAt = time.Now()
		replicas[1].Kill(t)
	})
	e2eutil.WaitUntil(t, 10*time.Second, "the balancer to see replica 1 unready", func() bool { return !lb.ready(replicas[1]) })
	removedAt := lb.removedAt(replicas[1])
	killed.note("the balancer stopped sending to replica 1 %s after SIGKILL", removedAt.Sub(killedAt).Round(time.Millisecond))
	time.Sleep(time.Second)
	replicas[1].Start(t)
	replicas[1].WaitReady(t)
	e2eutil.WaitUntil(t, 10*time.Second, "the balancer to take replica 1 back", func() bool { return lb.ready(replicas[1]) })
	time.Sleep(2 * time.Second)

	// c. The policy ConfigMap changed: a valid change applies on both replicas without a restart; an
	// invalid one is refused, said in the log and the metric, and the last good policy stays.
	valid := begin("c. policy: valid change")
	s.want.Store(&expectation{build: e2eutil.Build2019}) // either toleration while the replicas pick it up
	changed := time.Now()
	policies.write(t, map[string][]byte{"policy.yaml": []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints:\n- {key: os, value: Windows, effect: NoSchedule}\n")})
	for _, r := range replicas {
		e2eutil.WaitUntil(t, 30*time.Second, fmt.Sprintf("replica %d to apply the valid policy", r.Index), func() bool {
			return r.Metric(t, "wincompat_policy_reloads_total", "result", "applied") >= 1
		})
	}
	valid.note("both replicas applied it %s after the write (they poll the file every 5 s)", time.Since(changed).Round(10*time.Millisecond))
	want = &expectation{build: e2eutil.Build2019, toleration: "Windows"}
	s.want.Store(want) // from now on every pod must carry the new toleration
	time.Sleep(3 * time.Second)

	invalid := begin("c'. policy: invalid change")
	policies.write(t, map[string][]byte{"policy.yaml": []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaint:\n- {key: os, value: bogus, effect: NoSchedule}\n")})
	for _, r := range replicas {
		e2eutil.WaitUntil(t, 30*time.Second, fmt.Sprintf("replica %d to refuse the invalid policy", r.Index), func() bool {
			return r.Metric(t, "wincompat_policy_valid", "", "") == 0
		})
		if n := r.Metric(t, "wincompat_policy_reloads_total", "result", "rejected"); n != 1 {
			t.Errorf("replica %d: wincompat_policy_reloads_total{result=\"rejected\"} = %v, want 1", r.Index, n)
		}
		line := r.LogLine(t, "policy file changed but is invalid; keeping the last good policy")
		if line == nil {
			t.Errorf("replica %d logged no refusal of the invalid policy; its log:\n%s", r.Index, r.LogTail())
			continue
		}
		if msg := fmt.Sprint(line["error"]); line["level"] != "error" || !strings.Contains(msg, `line 3: unknown key "windowsNodeTaint"`) {
			t.Errorf("replica %d: the refusal does not say what is wrong and where: %v", r.Index, line)
		}
		invalid.note("replica %d logged: %s: %v", r.Index, line["msg"], line["error"])
	}
	time.Sleep(3 * time.Second)
	// The ConfigMap mended. Until then a replica that restarts cannot start: these run without
	// --policy-configmap, so the last good policy lives only in the process it replaces (with it, as the
	// chart runs them, it would start with the kept one: TestPolicyCannotTakeAdmissionDown).
	policies.write(t, map[string][]byte{"policy.yaml": []byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints:\n- {key: os, value: Windows, effect: NoSchedule}\n")})
	for _, r := range replicas {
		e2eutil.WaitUntil(t, 30*time.Second, fmt.Sprintf("replica %d to take the mended policy", r.Index), func() bool {
			return r.Metric(t, "wincompat_policy_valid", "", "") == 1
		})
	}

	// d. The API server restarted on the same etcd, port and certificates. Creations fail while it is
	// down (the API server's failures, not wincompat's); then wincompat's node inventory must follow
	// the cluster again without a restart: the only Windows node is replaced by one of another build.
	restart := begin("d. API server restart")
	s.want.Store(&expectation{toleration: "Windows"})
	time.Sleep(time.Second)
	// Down for a few seconds: shorter than the leader election's renew deadline (10 s), which
	// TestLeaderSurvivesAPIServerOutage covers.
	ar := restartAPIServer(t, cfg, time.Second, 0)
	restart.apiDown, restart.apiUp = ar.down, ar.up
	restart.note("kube-apiserver: SIGTERM to exit %s (SIGKILL after 1 s: %v), start to ready %s, down %s in all",
		ar.exited.Sub(ar.down).Round(10*time.Millisecond), ar.killed, ar.up.Sub(ar.exited).Round(10*time.Millisecond), ar.up.Sub(ar.down).Round(10*time.Millisecond))
	// A replica that exits on its own is wincompat's failure: report it, and restart it as the kubelet
	// would, so that the phase goes on and shows the rest. One exception: a leader gives up its Lease,
	// and with it the process, when the API server is down for longer than the leader election tolerates;
	// that is TestLeaderSurvivesAPIServerOutage's failing case, and on a busy machine this restart can
	// take that long. Then it is reported here, not failed twice.
	outage := ar.up.Sub(ar.down)
	leaderLost := false
	survived := func() {
		for _, r := range replicas {
			if err := r.Exited(); err != nil {
				if outage >= e2eutil.LeaseTolerance && strings.Contains(r.LastLogLine(), "leader election lost") {
					leaderLost = true
					restart.note("replica %d exited (%q) after an API server outage of %s, longer than a leader survives (TestLeaderSurvivesAPIServerOutage); restarted",
						r.Index, r.LastLogLine(), outage.Round(10*time.Millisecond))
				} else {
					t.Errorf("replica %d exited during the API server restart: %v; the end of its log:\n%s", r.Index, err, r.LogTail())
					restart.note("replica %d exited on its own (%s); restarted", r.Index, r.LastLogLine())
				}
				r.Start(t)
				r.WaitReady(t)
			}
		}
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "win-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.AddNode(t, e2eutil.TestNode{Name: "win-b", OS: "windows", Build: e2eutil.Build2022})
	replaced := time.Now()
	for _, r := range replicas {
		e2eutil.WaitUntil(t, 60*time.Second, fmt.Sprintf("replica %d to choose build %s from the cluster", r.Index, e2eutil.Build2022), func() bool {
			survived()
			build, source, err := r.Review(caPEM)
			return err == nil && build == e2eutil.Build2022 && source == policy.SourceCluster
		})
	}
	restart.note("both replicas chose the new node's build %s (build-source cluster) %s after it replaced win-a, without a restart",
		e2eutil.Build2022, time.Since(replaced).Round(10*time.Millisecond))
	s.want.Store(&expectation{build: e2eutil.Build2022, toleration: "Windows"})
	// A leader that cannot renew its Lease gives up after the renew deadline (controller-runtime's
	// default, 10 s, from the first failed renewal): judge survival once that has passed.
	time.Sleep(max(3*time.Second, time.Until(ar.down.Add(12*time.Second))))
	survived()

	// e. Every replica SIGKILLed and kept down (a bad rollout, the node pool lost), webhook only: with
	// failurePolicy Fail every Windows pod creation fails until a replica is back. Counted, not hoped.
	allDown := func(p *streamPhase) {
		time.Sleep(time.Second)
		for _, r := range replicas {
			r.Kill(t)
		}
		killed := time.Now()
		time.Sleep(e2eutil.AllDownFor)
		for _, r := range replicas {
			r.Start(t)
		}
		for _, r := range replicas {
			r.WaitReady(t)
			e2eutil.WaitUntil(t, 10*time.Second, fmt.Sprintf("the balancer to take replica %d back", r.Index), func() bool { return lb.ready(r) })
		}
		p.note("both replicas SIGKILLed, restarted after %s, both serving again %s after the kill", e2eutil.AllDownFor, time.Since(killed).Round(10*time.Millisecond))
		time.Sleep(time.Second)
	}
	webhookDown := begin("e. every replica SIGKILL, down 30 s: webhook only")
	for _, r := range replicas {
		// Only to keep the rolling restart of e' short: its graceful stops need no long drain here.
		r.Args = append(r.Args, "--shutdown-delay=1s")
	}
	allDown(webhookDown)

	// e'. To hybrid, replica by replica as a rollout does, with the admission policies installed as the
	// chart installs them (the replicas write none), then the webhook at failurePolicy Ignore, as the
	// chart installs it in hybrid mode.
	toHybrid := begin("e'. rolling restart to hybrid")
	for _, r := range replicas {
		lb.drain(r, true)
		if err := r.Stop(30 * time.Second); err != nil {
			t.Errorf("replica %d on SIGTERM: %v", r.Index, err)
		}
		r.Args = append(r.Args, "--engine=hybrid")
		r.Start(t)
		r.WaitReady(t)
		lb.drain(r, false)
		e2eutil.WaitUntil(t, 10*time.Second, fmt.Sprintf("the balancer to take replica %d back", r.Index), func() bool { return lb.ready(r) })
	}
	faultPolicy, err := policy.Load([]byte("apiVersion: wincompat.io/v1alpha1\nkind: Policy\nwindowsNodeTaints:\n- {key: os, value: Windows, effect: NoSchedule}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e2eutil.InstallHybridPolicies(t, cl.C, faultPolicy)
	e2eutil.SetWebhookFailurePolicy(t, cl, admissionregistrationv1.Ignore)
	hybridWant := &expectation{toleration: "Windows", byAdmissionPolicy: true}
	e2eutil.WaitUntil(t, 30*time.Second, "the API server to apply the admission policies", func() bool {
		pod, err := cs.CoreV1().Pods(e2eutil.FaultNS).Create(ctx, e2eutil.FaultPod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && hybridWant.check(pod) == ""
	})
	s.want.Store(hybridWant)
	time.Sleep(2 * time.Second)

	// f. The same outage in hybrid mode: the API server's admission policies keep every Windows pod
	// admissible and pinned to Windows nodes; only the build decision waits for a replica.
	hybridDown := begin("f. every replica SIGKILL, down 30 s: hybrid")
	allDown(hybridDown)
	s.close()

	t.Log("\n" + phaseTable(phases))
	for _, p := range phases {
		for _, n := range p.notes {
			t.Logf("%s: %s", p.name, n)
		}
		for _, f := range p.failureList() {
			t.Logf("%s: %d× %s", p.name, f.n, f.msg)
		}
	}

	// What the design promises. With a replica left to serve, no creation fails: the certificate
	// rotation, a graceful replica restart and policy changes are invisible to the API server; in hybrid
	// mode, not even with every replica killed and down for 30 s. (A graceful
	// restart under load loses the reviews the API server sends on keep-alive connections the replica
	// closes on SIGTERM: TestGracefulShutdownAnswersKeepAliveRequests.)
	for _, p := range []*streamPhase{steady, rotation, graceful, valid, invalid, toHybrid, hybridDown} {
		if n := p.failed(); n > 0 {
			t.Errorf("%s: %d creations failed; the goal is none while a replica serves", p.name, n)
		}
	}
	// SIGKILL: the reviews in flight on the killed replica are lost, and the API server does not retry
	// them: its mutating webhook dispatcher (k8s.io/apiserver v0.36.3,
	// pkg/admission/plugin/webhook/mutating/dispatcher.go) sends the review once (r.Do), and client-go
	// retries only GETs (rest/request.go, isErrRetryableFunc); GenericWebhook.WithExponentialBackoff is
	// for the authentication and authorization webhooks. Nor can the balancer know before its next
	// readiness probe, so new connections in that window are refused. wincompat promises failurePolicy
	// Fail's side of it (no pod admitted without its changes, checked for every creation) and a
	// recovery: no failure of a creation begun after the balancer stopped sending to the dead replica.
	for _, f := range webhookFailuresOnly(t, killed) {
		if f.class == classWebhook && f.at.After(removedAt) {
			t.Errorf("%s: a creation begun %s after the balancer took the killed replica out failed: %s", killed.name, f.at.Sub(removedAt), f.msg)
		}
	}
	// Webhook only, every replica down: creations fail (failurePolicy Fail), all at the webhook, none
	// admitted without wincompat's changes.
	if webhookDown.failed() == 0 {
		t.Errorf("%s: no creation failed, though no replica answered for %s with failurePolicy Fail", webhookDown.name, e2eutil.AllDownFor)
	}
	webhookFailuresOnly(t, webhookDown)
	// The API server restart: its own failures only, all while it was down.
	if n := restart.unexpected.Load(); n > 0 {
		t.Errorf("%s: %d pods were admitted without wincompat's expected changes", restart.name, n)
	}
	for _, f := range restart.failureStarts() {
		if f.class == classWebhook && leaderLost {
			t.Logf("%s: a webhook call failed after the leader exited (TestLeaderSurvivesAPIServerOutage): %s", restart.name, f.msg)
		} else if f.class == classWebhook {
			t.Errorf("%s: a webhook call failed: %s", restart.name, f.msg)
		} else if f.at.Before(ar.down) || f.at.After(ar.up) {
			t.Errorf("%s: a creation begun outside the API server's downtime failed: %s", restart.name, f.msg)
		}
	}
	for _, p := range phases {
		if p.created.Load() < 20 {
			t.Errorf("%s: only %d pods created; the stream did not cover the phase", p.name, p.created.Load())
		}
	}
	for _, r := range replicas {
		if err := r.Exited(); err != nil {
			t.Errorf("replica %d exited on its own: %v\n%s", r.Index, err, r.LogTail())
			continue
		}
		// Stopped as a rollout stops them, before the API server, whose drain their watches would hold.
		if err := r.Stop(30 * time.Second); err != nil {
			t.Errorf("replica %d on SIGTERM: %v", r.Index, err)
		}
	}
}

// TestLeaderSurvivesAPIServerOutage: wincompat's admission does not need the API server (the caches
// answer), so an API server that is down for longer than the leader election's renew deadline must not
// take a replica down. Every replica runs with --leader-elect, as the chart runs them; the leader can
// renew its Lease for at most the renew deadline (controller-runtime's default, 10 s), and then must give
// up only what needs the lease (RuntimeClass management), not the process.
func TestLeaderSurvivesAPIServerOutage(t *testing.T) {
	ctx := context.Background()
	cl := e2eutil.NewCluster(t)
	e2eutil.SetUpNamespace(ctx, t, cl.C, e2eutil.OwnNamespace, nil, nil)
	e2eutil.SetUpNamespace(ctx, t, cl.C, e2eutil.FaultNS, map[string]string{policy.LabelEnabled: "true"}, nil)
	cl.AddNode(t, e2eutil.TestNode{Name: "win-a", OS: "windows", Build: e2eutil.Build2019})
	r := newReplica(t, 0, e2eutil.BuildWincompat(t), e2eutil.WriteKubeConfig(t, cl, "wincompat", "system:masters"), cl.Webhook.CertDir, "")
	r.Start(t)
	r.WaitReady(t)
	e2eutil.WaitUntil(t, 30*time.Second, "the replica to hold the leader Lease", func() bool {
		var lease coordinationv1.Lease
		err := cl.C.Get(ctx, client.ObjectKey{Namespace: e2eutil.OwnNamespace, Name: "wincompat.io"}, &lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	})
	if build, source, err := r.Review(cl.Webhook.CAData); err != nil || build != e2eutil.Build2019 || source != policy.SourceCluster {
		t.Fatalf("before the outage: build %q from %q, %v", build, source, err)
	}

	ar := restartAPIServer(t, cl.Cfg, time.Second, 12*time.Second) // past the renew deadline and one retry period
	t.Logf("kube-apiserver down for %s", ar.up.Sub(ar.down).Round(10*time.Millisecond))
	if err := r.Exited(); err != nil {
		t.Fatalf("the leader exited while the API server was down: %q. Its admission did not need the API server; "+
			"only RuntimeClass management needs the lease, and losing it should stop that alone. The end of its log:\n%s", r.LastLogLine(), r.LogTail())
	}
	if build, source, err := r.Review(cl.Webhook.CAData); err != nil || build != e2eutil.Build2019 || source != policy.SourceCluster {
		t.Errorf("after the outage: build %q from %q, %v", build, source, err)
	}
	if err := r.Stop(30 * time.Second); err != nil {
		t.Errorf("on SIGTERM: %v", err)
	}
}

// TestGracefulShutdownAnswersKeepAliveRequests pins down how TestFaultsUnderLoad's graceful replica
// restart loses creations. The API server keeps HTTP/1.1 connections to the webhook open between reviews
// and sends the next review on one of them at any moment. On SIGTERM wincompat (controller-runtime's
// webhook server, http.Server.Shutdown) closes its listener and, at once, every connection that is
// between two requests; a review the API server has just written to such a connection is never read,
// the API server reads EOF (or a reset) and, as it does not retry a webhook call, fails the creation
// (failurePolicy Fail). The same happens to a review sent on a connection established before the
// endpoint left the Service. A server that finishes "the reviews in flight" must also answer what
// arrives on its open connections for a while after SIGTERM, closing each after its answer
// (Connection: close) so that the API server moves to the other replicas.
func TestGracefulShutdownAnswersKeepAliveRequests(t *testing.T) {
	// As `wincompat serve --shutdown-delay` (default 5s) does; the test needs only more than its 0.5 s.
	cl := e2eutil.StartClusterWith(t, nil, func(o *server.Options) { o.ShutdownDelay = 2 * time.Second })
	conn, err := tls.Dial("tcp", cl.WebhookAddr(), cl.WebhookTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	review := func(uid string) (*http.Response, error) {
		body := e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{
			UID: uid, Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: e2eutil.ReadyNamespace, Object: e2eutil.PodJSON(t, e2eutil.ReadyNamespace),
		})
		if _, err := fmt.Fprintf(conn, "POST /mutate-pod HTTP/1.1\r\nHost: wincompat\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return nil, err
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, err
	}
	if resp, err := review("before"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a review on a fresh keep-alive connection: %v %v", resp, err)
	}
	// The connection is now between two requests, as the API server's pooled connections mostly are.
	stopped := make(chan struct{})
	go func() { cl.StopServing(); close(stopped) }() // SIGTERM
	time.Sleep(500 * time.Millisecond)               // the endpoint is leaving the Service; the API server does not know yet
	resp, err := review("after-sigterm")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("a review sent on an open keep-alive connection 0.5 s after SIGTERM was not answered (%v, %v): "+
			"the API server fails that pod creation", resp, err)
	} else if !resp.Close {
		t.Error("the answer during the drain does not ask the client to close the connection: it would keep sending reviews to a replica that is leaving")
	}
	<-stopped
}

// waitForPods waits until a dry-run pod of the stream comes back as want says: wincompat is serving
// through the balancer and its caches know the namespace and the nodes.
func waitForPods(t *testing.T, cs kubernetes.Interface, want *expectation) {
	t.Helper()
	var last string
	e2eutil.WaitUntil(t, 30*time.Second, "wincompat to mutate the stream's pods through the balancer", func() bool {
		got, err := cs.CoreV1().Pods(e2eutil.FaultNS).Create(context.Background(), e2eutil.FaultPod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false
		}
		last = want.check(got)
		return last == ""
	})
}

// expectation is what every admitted pod of the stream must carry; an empty field accepts anything
// (while a change is being picked up).
type expectation struct {
	build, toleration string
	// byAdmissionPolicy: in hybrid mode the admission policies always act, the webhook only while a
	// replica answers; the pod must carry their marker and be pinned to Windows nodes.
	byAdmissionPolicy bool
}

// check returns what is wrong with an admitted pod, or "".
func (e *expectation) check(pod *corev1.Pod) string {
	a := pod.Annotations
	switch {
	case !e.byAdmissionPolicy && a[policy.AnnotationVersion] == "":
		return "admitted without wincompat's version annotation"
	case e.byAdmissionPolicy && a[policy.AnnotationAdmissionPolicy] == "":
		return "admitted without the admission policy's marker"
	case e.byAdmissionPolicy && pod.Spec.NodeSelector[corev1.LabelOSStable] != "windows":
		return fmt.Sprintf("nodeSelector %v, want kubernetes.io/os=windows", pod.Spec.NodeSelector)
	case pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsUser != nil:
		return "admitted with runAsUser"
	case e.build != "" && (a[policy.AnnotationBuild] != e.build || a[policy.AnnotationBuildSource] != policy.SourceCluster):
		return fmt.Sprintf("build %q from %q, want %s from the cluster", a[policy.AnnotationBuild], a[policy.AnnotationBuildSource], e.build)
	case e.toleration != "" && e2eutil.CountToleration(pod, corev1.Toleration{Key: "os", Operator: corev1.TolerationOpEqual, Value: e.toleration, Effect: corev1.TaintEffectNoSchedule}) != 1:
		return fmt.Sprintf("tolerations %v, want os=%s:NoSchedule once", pod.Spec.Tolerations, e.toleration)
	}
	return ""
}

// projectedDir is a directory laid out as the kubelet writes a Secret or ConfigMap volume (its
// AtomicWriter): each file is a symlink into ..data, a symlink to a timestamped directory. An update
// writes a new timestamped directory, points ..data_tmp at it, renames ..data_tmp over ..data and
// removes the old directory, so a reader sees all the old files or all the new ones, never a mix.
type projectedDir struct {
	dir     string
	version int
	current string
}

func newProjectedDir(t *testing.T, name string) *projectedDir {
	dir := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &projectedDir{dir: dir}
}

func (p *projectedDir) write(t *testing.T, files map[string][]byte) {
	t.Helper()
	p.version++
	ts := fmt.Sprintf("..%s.%d", time.Now().Format("2006_01_02_15_04_05"), p.version)
	if err := os.Mkdir(filepath.Join(p.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(p.dir, ts, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(p.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(p.dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if p.current != "" {
		if err := os.RemoveAll(filepath.Join(p.dir, p.current)); err != nil {
			t.Fatal(err)
		}
	}
	p.current = ts
}

func newReplica(t *testing.T, index int, bin, kubeconfig, certDir, policyFile string) *e2eutil.Replica {
	r := &e2eutil.Replica{Index: index, Bin: bin, WorkDir: t.TempDir()}
	for _, p := range []*int{&r.Port, &r.ProbePort, &r.MetricsP} {
		var err error
		if *p, err = controlplane.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	r.Args = []string{"serve", "--resolve-images=false",
		"--bind-address", "127.0.0.1", "--port", strconv.Itoa(r.Port), "--cert-dir", certDir,
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(r.MetricsP),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(r.ProbePort),
		"--leader-elect", "--namespace", e2eutil.OwnNamespace, "--kubeconfig", kubeconfig,
	}
	if policyFile != "" {
		r.Args = append(r.Args, "--policy", policyFile)
	}
	t.Cleanup(func() {
		if r.Server != nil && r.Exited() == nil {
			if err := r.Server.Stop(30 * time.Second); err != nil {
				t.Errorf("stopping replica %d: %v", r.Index, err)
			}
		}
	})
	return r
}

// balancer is a Service in miniature: a TCP listener that hands each new connection to the next ready
// replica, round robin, and passes bytes through untouched (TLS ends at the replica). Like an endpoints
// controller, it learns readiness from the replicas' /readyz, and drops a replica whose pod is being
// deleted at once (drain). Connections already established stay where they are, as conntrack keeps
// them. A connection it cannot place, or whose replica refuses it, is reset, as a client of a ClusterIP
// without a working endpoint sees it.
type balancer struct {
	ln       net.Listener
	backends []*lbBackend
	next     atomic.Uint64
	refused  atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
	stop     chan struct{}
}

type lbBackend struct {
	r               *e2eutil.Replica
	ready, draining atomic.Bool
	conns           atomic.Int64 // connections handed to it
	mu              sync.Mutex
	removedAt       time.Time // when a probe last found it unready after it had been ready
	addr, readyURL  string
	probe           *http.Client
}

func startBalancer(t *testing.T, addr string, replicas []*e2eutil.Replica) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the balancer cannot listen where the API server calls the webhook: %v", err)
	}
	b := &balancer{ln: ln, conns: map[net.Conn]bool{}, stop: make(chan struct{})}
	for _, r := range replicas {
		be := &lbBackend{r: r, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)), readyURL: r.ReadyURL(),
			probe: &http.Client{Timeout: time.Second}}
		b.backends = append(b.backends, be)
		b.wg.Go(func() { b.poll(be) })
	}
	b.wg.Go(b.serve)
	t.Cleanup(b.close)
	e2eutil.WaitUntil(t, 10*time.Second, "the balancer to see both replicas ready", func() bool {
		return !slices.ContainsFunc(b.backends, func(be *lbBackend) bool { return !be.ready.Load() })
	})
	return b
}

func (b *balancer) backend(r *e2eutil.Replica) *lbBackend {
	return b.backends[slices.IndexFunc(b.backends, func(be *lbBackend) bool { return be.r == r })]
}

// drain takes a replica out (true) at once, as the EndpointSlice controller does for a deleted pod, or
// lets readiness decide again (false).
func (b *balancer) drain(r *e2eutil.Replica, on bool) { b.backend(r).draining.Store(on) }

func (b *balancer) ready(r *e2eutil.Replica) bool {
	be := b.backend(r)
	return be.ready.Load() && !be.draining.Load()
}

func (b *balancer) removedAt(r *e2eutil.Replica) time.Time {
	be := b.backend(r)
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.removedAt
}

// connections returns how many connections each replica was handed so far.
func (b *balancer) connections() []int64 {
	var out []int64
	for _, be := range b.backends {
		out = append(out, be.conns.Load())
	}
	return out
}

func (b *balancer) poll(be *lbBackend) {
	tick := time.NewTicker(e2eutil.LBPoll)
	defer tick.Stop()
	for {
		ok := false
		if resp, err := be.probe.Get(be.readyURL); err == nil {
			ok = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		if !ok && be.ready.Load() {
			be.mu.Lock()
			be.removedAt = time.Now()
			be.mu.Unlock()
		}
		be.ready.Store(ok)
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
	}
}

func (b *balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() { b.handle(c) })
	}
}

func (b *balancer) pick() *lbBackend {
	start := b.next.Add(1)
	for i := range uint64(len(b.backends)) {
		be := b.backends[(start+i)%uint64(len(b.backends))]
		if be.ready.Load() && !be.draining.Load() {
			return be
		}
	}
	return nil
}

func (b *balancer) handle(front net.Conn) {
	be := b.pick()
	if be == nil {
		b.refused.Add(1)
		reset(front)
		return
	}
	back, err := net.DialTimeout("tcp", be.addr, time.Second)
	if err != nil {
		b.refused.Add(1)
		reset(front)
		return
	}
	be.conns.Add(1)
	if !b.track(front, back) {
		return
	}
	done := make(chan struct{})
	go func() { pipe(back, front); close(done) }()
	pipe(front, back)
	<-done
	b.untrack(front, back)
}

func (b *balancer) track(conns ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.stop:
		for _, c := range conns {
			c.Close()
		}
		return false
	default:
	}
	for _, c := range conns {
		b.conns[c] = true
	}
	return true
}

// closeAll closes every connection passed through so far, both ends, with a FIN; it returns how many
// client connections it closed.
func (b *balancer) closeAll() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		c.Close()
	}
	return len(b.conns) / 2
}

func (b *balancer) untrack(conns ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range conns {
		delete(b.conns, c)
		c.Close()
	}
}

// pipe copies src to dst until src ends: a clean end (FIN) is passed on as a half-close, a reset as a
// reset, so that each side sees what it would see without the balancer.
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		reset(dst)
		src.Close()
		return
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// reset closes c with a TCP RST instead of a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

func (b *balancer) close() {
	b.mu.Lock()
	select {
	case <-b.stop:
		b.mu.Unlock()
		return
	default:
	}
	close(b.stop)
	b.ln.Close()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// stream creates pods from creators, one every interval each, and files each outcome under the phase
// current when the creation began.
type stream struct {
	cs    kubernetes.Interface
	lb    *balancer
	phase atomic.Pointer[streamPhase]
	want  atomic.Pointer[expectation]
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	gate  sync.RWMutex // creations hold it shared; pause holds it alone
}

// pause waits for the creations in flight and holds new ones back until the returned func is called.
func (s *stream) pause() (resume func()) {
	s.gate.Lock()
	return s.gate.Unlock
}

type failureClass string

const (
	// classWebhook: the API server could not get wincompat's answer ("failed calling webhook"), or
	// validation rejected what wincompat should have changed.
	classWebhook failureClass = "webhook"
	// classAPIServer: the API server itself did not answer or refused the request.
	classAPIServer failureClass = "API server"
)

type failureAt struct {
	class failureClass
	msg   string
	at    time.Time
}

type failureCount struct {
	msg string
	n   int
}

// streamPhase is what the stream saw while one phase was current.
type streamPhase struct {
	name             string
	start, end       time.Time
	conns0, conns1   []int64 // the balancer's connections per replica at start and end
	created          atomic.Int64
	unexpected       atomic.Int64 // admitted, but not as the expectation says (counted as a failure)
	apiDown, apiUp   time.Time
	mu               sync.Mutex
	latency          *hdrhistogram.Histogram
	failures         []failureAt
	notes            []string
	webhookFailures  int64
	apiServerFailure int64
}

func (p *streamPhase) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

func (p *streamPhase) fail(class failureClass, msg string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, failureAt{class, msg, at})
	if class == classWebhook {
		p.webhookFailures++
	} else {
		p.apiServerFailure++
	}
}

func (p *streamPhase) failed() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.webhookFailures + p.apiServerFailure
}

func (p *streamPhase) failureStarts() []failureAt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.failures)
}

// failureList counts the failures by class and message.
func (p *streamPhase) failureList() []failureCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []failureCount
	for _, f := range p.failures {
		msg := string(f.class) + ": " + f.msg
		if i := slices.IndexFunc(out, func(c failureCount) bool { return c.msg == msg }); i >= 0 {
			out[i].n++
		} else {
			out = append(out, failureCount{msg, 1})
		}
	}
	return out
}

func startStream(cs kubernetes.Interface, lb *balancer, want *expectation, creators int, interval time.Duration) *stream {
	s := &stream{cs: cs, lb: lb, stop: make(chan struct{})}
	s.want.Store(want)
	s.begin("start")
	for w := range creators {
		s.wg.Go(func() { s.create(w, interval) })
	}
	return s
}

// begin makes a new phase current and ends the last one.
func (s *stream) begin(name string) *streamPhase {
	now := time.Now()
	p := &streamPhase{name: name, start: now, latency: load.NewHistogram(), conns0: s.lb.connections()}
	if last := s.phase.Swap(p); last != nil {
		last.end, last.conns1 = now, p.conns0
	}
	return p
}

// close stops the creators, waits for those in flight and ends the last phase.
func (s *stream) close() {
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		p := s.phase.Load()
		p.end, p.conns1 = time.Now(), s.lb.connections()
	})
}

func (s *stream) create(worker int, interval time.Duration) {
	next := time.Now()
	for i := 0; ; i++ {
		next = next.Add(interval)
		select {
		case <-s.stop:
			return
		case <-time.After(time.Until(next)):
		}
		s.createOne(fmt.Sprintf("stream-%d-%d", worker, i))
	}
}

// burst creates n pods at once, on top of the stream: the API server then needs more connections to the
// webhook than it keeps open, and opens new ones through the balancer.
func (s *stream) burst(n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { s.createOne(fmt.Sprintf("burst-%d-%d", time.Now().UnixNano(), i)) })
	}
	wg.Wait()
}

// createOne creates a pod and files the outcome under the current phase.
func (s *stream) createOne(name string) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	p, want := s.phase.Load(), s.want.Load()
	pod := e2eutil.FaultPod(name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	got, err := s.cs.CoreV1().Pods(e2eutil.FaultNS).Create(ctx, pod, metav1.CreateOptions{})
	switch {
	case err != nil:
		class, msg := classify(err)
		p.fail(class, strings.ReplaceAll(msg, pod.Name, "NAME"), start)
	case want.check(got) != "":
		p.unexpected.Add(1)
		p.fail(classWebhook, "admitted, but "+want.check(got), start)
	default:
		p.created.Add(1)
		p.mu.Lock()
		_ = p.latency.RecordValue(max(time.Since(start).Microseconds(), 1))
		p.mu.Unlock()
	}
}

// webhookFailuresOnly checks that no pod of phase p was admitted without wincompat's changes and that
// every failure was the webhook call's, and returns the failures.
func webhookFailuresOnly(t *testing.T, p *streamPhase) []failureAt {
	t.Helper()
	if n := p.unexpected.Load(); n > 0 {
		t.Errorf("%s: %d pods were admitted without wincompat's expected changes", p.name, n)
	}
	starts := p.failureStarts()
	for _, f := range starts {
		if f.class != classWebhook {
			t.Errorf("%s: a failure that is not the webhook call's: %s", p.name, f.msg)
		}
	}
	return starts
}

// classify tells a failed webhook call (or a pod validation rejected because wincompat did not change
// it) from the API server's own failures (down, shutting down, not ready).
func classify(err error) (failureClass, string) {
	msg := err.Error()
	if _, ok := err.(apierrors.APIStatus); ok && (strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "cannot be set for a windows pod")) {
		return classWebhook, msg
	}
	return classAPIServer, msg
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// phaseTable renders one line per phase.
func phaseTable(phases []*streamPhase) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tseconds\tcreated\tfailed: webhook\tfailed: API server\tof which not as expected\tp50 ms\tp99 ms\tmax ms\tconnections to r0/r1\t")
	for _, p := range phases {
		p.mu.Lock()
		l := load.PercentilesOf(p.latency)
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%d/%d\t\n", p.name, p.end.Sub(p.start).Seconds(), p.created.Load(),
			p.webhookFailures, p.apiServerFailure, p.unexpected.Load(), l.P50, l.P99, l.Max, p.conns1[0]-p.conns0[0], p.conns1[1]-p.conns0[1])
		p.mu.Unlock()
	}
	tw.Flush()
	return b.String()
}

// apiServerRestart is how restartAPIServer went.
type apiServerRestart struct {
	down, exited, up time.Time // SIGTERM sent, process gone, /readyz answering again
	killed           bool      // SIGKILL after the grace period
}

// restartAPIServer stops envtest's kube-apiserver and starts the same command line again: the same etcd,
// port, certificates and client CA, so every client's configuration stays valid. (envtest's own
// APIServer.Stop and Start would not do: Stop forgets the certificate directory it made, and Start makes
// a new one with a new serving CA and new users, which no existing client or kubeconfig trusts.)
//
// It sends SIGTERM and, as the kubelet does at the end of a pod's grace period, SIGKILL after grace:
// kube-apiserver drains for up to its --request-timeout (60 s) while clients hold watches, as
// wincompat's informers do, so a graceful stop alone would keep it down for a minute. It starts the new
// process no earlier than downFor after the SIGTERM, and returns once /readyz answers.
func restartAPIServer(t *testing.T, cfg *rest.Config, grace, downFor time.Duration) apiServerRestart {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	children, err := load.Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	pid, ok := children["kube-apiserver"]
	if !ok {
		t.Fatalf("no kube-apiserver among this process's children: %v", children)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if u, err := url.Parse(cfg.Host); err != nil || !slices.Contains(argv, "--secure-port="+u.Port()) {
		t.Fatalf("kube-apiserver %d does not serve %s: %v", pid, cfg.Host, argv)
	}
	var r apiServerRestart
	r.down = time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// envtest waits for its process, so the pid disappears once it has exited.
	gone := func() bool { return syscall.Kill(pid, 0) != nil }
	for !gone() && time.Since(r.down) < grace {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone() {
		r.killed = true
		_ = syscall.Kill(pid, syscall.SIGKILL)
		e2eutil.WaitUntil(t, 10*time.Second, "kube-apiserver to exit on SIGKILL", gone)
	}
	r.exited = time.Now()
	time.Sleep(time.Until(r.down.Add(downFor)))

	logPath := filepath.Join(t.TempDir(), "kube-apiserver.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	// Registered after the control plane's cleanup, so it runs first: the API server stops before etcd.
	// The test stops wincompat before it ends, so no watch holds the API server's drain; on a failed
	// test's way out they may, hence SIGKILL after envtest's own stop timeout (20 s).
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Logf("the restarted kube-apiserver did not stop within 20 s of SIGTERM; killed")
		}
	})
	e2eutil.WaitUntil(t, 60*time.Second, "the restarted kube-apiserver to be ready", func() bool {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the restarted kube-apiserver exited:\n%s", b[max(0, len(b)-4000):])
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := cs.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil
	})
	r.up = time.Now()
	return r
}
