package e2eutil

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReviewRequest is the request part of an AdmissionReview, in JSON, so that tests can send what the
// typed structs cannot express (a null object, a wrong type in a field).
type ReviewRequest struct {
	UID       string                      `json:"uid"`
	Kind      metav1.GroupVersionKind     `json:"kind"`
	Resource  metav1.GroupVersionResource `json:"resource"`
	Namespace string                      `json:"namespace"`
	Operation string                      `json:"operation"`
	UserInfo  map[string]any              `json:"userInfo"`
	Object    json.RawMessage             `json:"object"`
}

func ReviewBody(t *testing.T, apiVersion string, req ReviewRequest) []byte {
	t.Helper()
	if req.Operation == "" {
		req.Operation = "CREATE"
	}
	if req.UserInfo == nil {
		req.UserInfo = map[string]any{"username": "e2e"}
	}
	b, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "AdmissionReview", "request": req})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	PodKind     = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	PodResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// PodJSON is windowsPod in JSON, with its type meta, as the API server sends objects.
func PodJSON(t *testing.T, ns string) []byte {
	t.Helper()
	pod := WindowsPod(ns, "direct")
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ReviewResponse is an AdmissionReview response of either version (v1 and v1beta1 share the shape).
type ReviewResponse struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Response   *admissionv1.AdmissionResponse `json:"response"`
}

// WebhookTLS trusts only the CA envtest signed wincompat's serving certificate with.
func (cl *Cluster) WebhookTLS(t *testing.T) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cl.Webhook.CAData) {
		t.Fatal("no CA certificate in controlplane.Webhook.CAData")
	}
	return &tls.Config{RootCAs: pool}
}

func (cl *Cluster) WebhookAddr() string {
	return net.JoinHostPort(cl.Webhook.Host, strconv.Itoa(cl.Webhook.Port))
}

// Post sends body to path on wincompat's server and decodes the answer when it is JSON.
func (cl *Cluster) Post(t *testing.T, path string, body []byte) (int, *ReviewResponse, string) {
	t.Helper()
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: cl.WebhookTLS(t)}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("https://"+cl.WebhookAddr()+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	var out ReviewResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, string(raw)
	}
	return resp.StatusCode, &out, string(raw)
}

// FreeAddr returns a loopback address nobody listens on yet.
func FreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
