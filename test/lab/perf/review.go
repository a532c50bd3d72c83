// Package perf measures wincompat as it runs: `wincompat serve` answering AdmissionReviews over HTTPS
// (review.go, driven by package load), and pod creation through a real kube-apiserver with and without
// wincompat's webhook (pods.go). cmd/perf runs both and writes the results and the plot (plot.go).
package perf

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/wincompat/wincompat/test/lab/perf/load"
)

// Review is one kind of AdmissionReview for the load: the same request under several uids, prepared
// once so that the generator spends nothing on encoding; or, when one-shot, a different request each
// time.
type Review struct {
	Name        string
	Description string
	// Patch is what each answer must carry; an answer that differs is an error.
	Patch PatchExpectation
	// WantResult is the result label wincompat must count the review under in wincompat_admission_total.
	WantResult string
	bodies     [][]byte
	uids       [][]byte // `"uid":"…"` as it appears in the response
	// oneShot reviews send each body once, whichever worker takes it; sent counts them.
	oneShot bool
	sent    atomic.Int64
}

// PatchExpectation is what an answer must carry besides "allowed".
type PatchExpectation int

const (
	NoPatch PatchExpectation = iota
	WithPatch
	// AnyPatch leaves the patch unchecked in each answer: for a review wincompat answers with a patch
	// that changes nothing, or with none, which the caller checks once by applying it.
	AnyPatch
)

// bodiesPerReview is how many uids each review rotates through: enough that an answer meant for
// another request would show, few enough to stay in cache.
const bodiesPerReview = 16

// NewReview wraps pod (JSON) in AdmissionReviews for namespace ns as the API server sends them for a
// Pod CREATE by the ReplicaSet controller, or with operation op.
func NewReview(name, description string, pod []byte, ns string, op admissionv1.Operation, want PatchExpectation, wantResult string) (*Review, error) {
	pods := make([][]byte, bodiesPerReview)
	for i := range pods {
		pods[i] = pod
	}
	return newReview(name, description, pods, ns, op, want, wantResult)
}

// NewOneShotReview is a review of each of pods, sent once each and in order across the workers: for
// load whose every request must be new to wincompat, such as images no cache has seen. A review sent
// after the last pod fails, so prepare more pods than the phases can send.
func NewOneShotReview(name, description string, pods [][]byte, ns string, want PatchExpectation, wantResult string) (*Review, error) {
	r, err := newReview(name, description, pods, ns, admissionv1.Create, want, wantResult)
	if r != nil {
		r.oneShot = true
	}
	return r, err
}

func newReview(name, description string, pods [][]byte, ns string, op admissionv1.Operation, want PatchExpectation, wantResult string) (*Review, error) {
	if len(pods) == 0 {
		return nil, fmt.Errorf("%s: no pods", name)
	}
	podGVK := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podGVR := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	r := &Review{Name: name, Description: description, Patch: want, WantResult: wantResult}
	for i, pod := range pods {
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(pod, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		uid := types.UID(fmt.Sprintf("0b6c1f0e-6b5a-4f5e-9d3c-%012d", i))
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID: uid, Kind: podGVK, Resource: podGVR, RequestKind: &podGVK, RequestResource: &podGVR,
				Name: meta.Metadata.Name, Namespace: ns, Operation: op,
				UserInfo: authenticationv1.UserInfo{
					Username: "system:serviceaccount:kube-system:replicaset-controller",
					UID:      "9d3b5f0c-1f2e-4c1a-8b7e-3a6f1c2d4e5f",
					Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
				},
				Object:  runtime.RawExtension{Raw: pod},
				DryRun:  ptr.To(false),
				Options: runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
			},
		}
		body, err := json.Marshal(&review)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r.bodies = append(r.bodies, body)
		r.uids = append(r.uids, []byte(`"uid":`+strconv.Quote(string(uid))))
	}
	return r, nil
}

// errNoneLeft is a one-shot review sent more often than it has pods.
var errNoneLeft = errors.New("no unsent pod left in a one-shot review: prepare more")

// take is the index of the body to send next: the worker's next in rotation, or the next unsent one.
func (r *Review) take(c *ReviewClient, worker int) (int, error) {
	if r.oneShot {
		i := r.sent.Add(1) - 1
		if i >= int64(len(r.bodies)) {
			return 0, errNoneLeft
		}
		return int(i), nil
	}
	i := c.next[worker]
	c.next[worker] = (i + 1) % len(r.bodies)
	return i, nil
}

// Body is the i-th prepared request body, for a tool that posts it on its own connections.
func (r *Review) Body(i int) []byte { return r.bodies[i%len(r.bodies)] }

// BodyBytes is the size of one request body.
func (r *Review) BodyBytes() int { return len(r.bodies[0]) }

// ReviewClient posts reviews to wincompat over HTTPS, each worker on a keep-alive connection of its
// own, as the API server does with its pool of connections to a webhook.
type ReviewClient struct {
	url     string
	clients []*http.Client
	bufs    []*bytes.Buffer
	next    []int
	dials   atomic.Int64
}

// NewReviewClient returns a client for workers workers that posts to https://127.0.0.1:port<path> and
// trusts only caPEM.
func NewReviewClient(port int, path string, caPEM []byte, workers int) (*ReviewClient, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in the PEM data")
	}
	c := &ReviewClient{url: fmt.Sprintf("https://127.0.0.1:%d%s", port, path), next: make([]int, workers)}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	for range workers {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c.dials.Add(1)
				return dialer.DialContext(ctx, network, addr)
			},
			// The API server speaks HTTP/1.1 to webhooks unless they offer HTTP/2, which wincompat
			// does not by default.
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
			MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true,
		}
		c.clients = append(c.clients, &http.Client{Transport: tr, Timeout: 10 * time.Second})
		c.bufs = append(c.bufs, &bytes.Buffer{})
	}
	return c, nil
}

// Connections is how many connections the client has opened: one per worker when keep-alive works.
func (c *ReviewClient) Connections() int64 { return c.dials.Load() }

// Close closes the idle connections.
func (c *ReviewClient) Close() {
	for _, hc := range c.clients {
		hc.CloseIdleConnections()
	}
}

var allowed = []byte(`"allowed":true`)
var patch = []byte(`"patch":`)

// Op posts r and checks the answer: HTTP 200, the request's uid, allowed, and a patch as r expects. The check looks for those members in the bytes instead of decoding the answer, so that
// the generator's cost stays small next to the server's.
func (c *ReviewClient) Op(r *Review) load.Op {
	return func(ctx context.Context, worker int) error {
		i, err := r.take(c, worker)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(r.bodies[i]))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := c.clients[worker].Do(req)
		if err != nil {
			return fmt.Errorf("transport: %w", err)
		}
		buf := c.bufs[worker]
		buf.Reset()
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			return fmt.Errorf("transport: reading the answer: %w", err)
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		case !bytes.Contains(buf.Bytes(), allowed):
			// Before the uid: a review refused unread (429, 408) is answered without one.
			return fmt.Errorf("not allowed%s", statusCode(buf.Bytes()))
		case !bytes.Contains(buf.Bytes(), r.uids[i]):
			return errors.New("answer without the request's uid")
		case r.Patch == WithPatch && !bytes.Contains(buf.Bytes(), patch):
			return errors.New("allowed without the expected patch")
		case r.Patch == NoPatch && bytes.Contains(buf.Bytes(), patch):
			return errors.New("allowed with an unexpected patch")
		}
		return nil
	}
}

// Answer posts one review of r (the first, or a one-shot review's next) and returns wincompat's
// response, decoded: for preparing pods from what wincompat actually does.
func (c *ReviewClient) Answer(ctx context.Context, r *Review) (*admissionv1.AdmissionResponse, error) {
	i := 0
	if r.oneShot {
		var err error
		if i, err = r.take(c, 0); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(r.bodies[i]))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.clients[0].Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: HTTP %d", http.MethodPost, c.url, resp.StatusCode)
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		return nil, err
	}
	if review.Response == nil {
		return nil, fmt.Errorf("%s %s: a review without a response", http.MethodPost, c.url)
	}
	return review.Response, nil
}

// OneRequestPerConnection makes each request open a connection of its own and give up after timeout:
// a caller with no pooled connection to wincompat, such as an API server that has just started or
// whose connections a peer's flood has pushed out, and which waits timeoutSeconds for an answer.
func (c *ReviewClient) OneRequestPerConnection(timeout time.Duration) {
	for _, hc := range c.clients {
		hc.Timeout = timeout
		hc.Transport.(*http.Transport).DisableKeepAlives = true
	}
}

// statusCode is the answer's status code (as in `"code":429`), such as the one wincompat refuses a
// review with when its budget of review bytes is spent, or nothing when the answer has none.
func statusCode(answer []byte) string {
	_, rest, ok := bytes.Cut(answer, []byte(`"code":`))
	if !ok {
		return ""
	}
	end := bytes.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end <= 0 {
		return ""
	}
	return " (code " + string(rest[:end]) + ")"
}
