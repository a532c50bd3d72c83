package operations

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestServerOperations: the probes and metrics a Deployment's probes and Prometheus use, and a graceful
// shutdown that finishes a review already in flight.
func TestServerOperations(t *testing.T) {
	cl := e2eutil.StartCluster(t)
	cl.StopServing()
	probe, metrics := e2eutil.FreeAddr(t), e2eutil.FreeAddr(t)
	cl.Serve(t, func(o *server.Options) { o.ProbeAddr, o.MetricsAddr = probe, metrics })

	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, "http://"+probe+path); code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	// One review so that wincompat's own series have samples.
	if code, resp, raw := cl.Post(t, "/mutate-pod", e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{
		UID: "ops-1", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: e2eutil.ReadyNamespace, Object: e2eutil.PodJSON(t, e2eutil.ReadyNamespace),
	})); code != http.StatusOK || resp == nil || !resp.Response.Allowed {
		t.Fatalf("review: %d %s", code, raw)
	}
	_, body := get(t, "http://"+metrics+"/metrics")
	for _, series := range []string{
		`wincompat_admission_total{mode="enforce",operation="CREATE",resource="pods",result="mutated"}`,
		`wincompat_changes_total{action="strip",field="spec.securityContext.runAsUser",mode="enforce"}`,
		`wincompat_build_selected_total{build="10.0.20348",mode="enforce",source="image"}`,
		`wincompat_admission_duration_seconds_bucket{resource="pods",le="0.001"}`,
		`controller_runtime_webhook_requests_total{code="200",webhook="/mutate-pod"}`, // controller-runtime's own, beside ours
	} {
		if !strings.Contains(body, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "wincompat_") && (strings.Contains(line, "namespace=") || strings.Contains(line, "pod=")) {
			t.Errorf("a wincompat series is labelled by namespace or pod: %s", line)
		}
	}

	// Graceful shutdown: a review whose body is still arriving when SIGTERM comes must be answered.
	conn, err := tls.Dial("tcp", cl.WebhookAddr(), cl.WebhookTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	review := e2eutil.ReviewBody(t, "admission.k8s.io/v1", e2eutil.ReviewRequest{
		UID: "in-flight", Kind: e2eutil.PodKind, Resource: e2eutil.PodResource, Namespace: e2eutil.ReadyNamespace, Object: e2eutil.PodJSON(t, e2eutil.ReadyNamespace),
	})
	half := len(review) / 2
	fmt.Fprintf(conn, "POST /mutate-pod HTTP/1.1\r\nHost: wincompat\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(review))
	if _, err := conn.Write(review[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the server has the request; its body is incomplete
	stopped := make(chan struct{})
	go func() { cl.StopServing(); close(stopped) }()
	time.Sleep(300 * time.Millisecond) // shutdown has begun and is waiting for us
	select {
	case <-stopped:
		t.Fatal("the server stopped with a review in flight")
	default:
	}
	if _, err := conn.Write(review[half:]); err != nil {
		t.Fatalf("the in-flight review was cut off: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, err := io.ReadAll(conn)
	if err != nil && !bytes.Contains(answer, []byte("in-flight")) {
		t.Fatalf("reading the answer: %v", err)
	}
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 200")) || !bytes.Contains(answer, []byte(`"uid":"in-flight"`)) || !bytes.Contains(answer, []byte(`"patch"`)) {
		t.Errorf("in-flight review not answered in full:\n%s", answer)
	}
	<-stopped
}
