package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// maxReviewBytes is controller-runtime's limit on a review body, kept so that an oversized review gets
// the same answer (413) as before.
const maxReviewBytes = 7 << 20

// Endpoint serves an admission.Handler over HTTP as controller-runtime's admission.Webhook does (the
// same body limit, content type check, panic recovery, logging and response), but decodes the review
// in one pass instead of two: controller-runtime's codec first reads the whole body just to find
// apiVersion and kind, which for a pod review was a sixth of wincompat's CPU per review.
type Endpoint struct {
	webhook admission.Webhook
}

// NewEndpoint returns h served over HTTP.
func NewEndpoint(h admission.Handler) *Endpoint {
	return &Endpoint{webhook: admission.Webhook{Handler: h}}
}

var reviewV1 = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		e.fail(w, http.StatusBadRequest, errors.New("request body is empty"))
		return
	}
	defer r.Body.Close()
	limited := &io.LimitedReader{R: r.Body, N: maxReviewBytes}
	body, err := readBody(limited, r.ContentLength)
	if err != nil {
		e.fail(w, http.StatusBadRequest, err)
		return
	}
	if limited.N <= 0 {
		e.fail(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewBytes))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		e.fail(w, http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct))
		return
	}
	req := admission.Request{}
	gvk, err := readReview(body, &req.AdmissionRequest)
	if err != nil {
		e.fail(w, http.StatusBadRequest, err)
		return
	}
	resp := e.webhook.Handle(r.Context(), req)
	out := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	if gvk.Empty() {
		gvk = reviewV1
	}
	out.SetGroupVersionKind(gvk)
	e.write(w, out)
}

// readBody reads the whole body into one buffer of the declared length (the API server always declares
// it) instead of growing one from 512 bytes, which copied a pod review four times over.
func readBody(r io.Reader, declared int64) ([]byte, error) {
	if declared <= 0 || declared >= maxReviewBytes {
		return io.ReadAll(r)
	}
	// One byte more than declared: a body that ends where it said fills all but that byte.
	buf := make([]byte, declared+1)
	n, err := io.ReadFull(r, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r) // longer than declared: net/http does not let this happen, but be whole
	return append(buf, rest...), err
}

// readReview reads a review into req and returns the version it names. The API server writes
// apiVersion and kind as they are spelled: such a review is decoded in one pass, case-sensitively and
// keeping integers as the API machinery's JSON serializer does. Anything else (a key missing or
// miscased, YAML, which that codec also accepts) takes controller-runtime's own way, so every body is
// answered as controller-runtime would; only a review naming apiVersion twice in different cases could
// be read differently, and no API server sends one.
func readReview(body []byte, req *admissionv1.AdmissionRequest) (schema.GroupVersionKind, error) {
	review := admissionv1.AdmissionReview{Request: req}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review); err == nil && review.APIVersion != "" && review.Kind != "" {
		return review.GroupVersionKind(), nil
	}
	*req = admissionv1.AdmissionRequest{}
	slow := anyVersionReview{}
	slow.Request = req
	slow.SetGroupVersionKind(reviewV1)
	_, gvk, err := admissionCodecs.UniversalDeserializer().Decode(body, nil, &slow)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	if gvk == nil {
		return schema.GroupVersionKind{}, nil
	}
	return *gvk, nil
}

// anyVersionReview is not registered in admissionCodecs' scheme, so the codec decodes v1 and v1beta1
// reviews (the same fields) into it alike, as controller-runtime's plumbing does.
type anyVersionReview struct{ admissionv1.AdmissionReview }

func (r *anyVersionReview) DeepCopyObject() runtime.Object {
	return &anyVersionReview{AdmissionReview: *r.AdmissionReview.DeepCopy()}
}

var admissionCodecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	utilruntime.Must(admissionv1.AddToScheme(scheme))
	utilruntime.Must(admissionv1beta1.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme)
}()

// fail answers a body that is not a review; like controller-runtime, with no apiVersion or kind, as
// there is no version to answer in.
func (e *Endpoint) fail(w http.ResponseWriter, code int32, err error) {
	resp := admission.Errored(code, err)
	e.write(w, admissionv1.AdmissionReview{Response: &resp.AdmissionResponse})
}

func (e *Endpoint) write(w http.ResponseWriter, review admissionv1.AdmissionReview) {
	if err := json.NewEncoder(w).Encode(review); err != nil {
		// Most likely the connection broke: one attempt at saying so, as controller-runtime makes.
		resp := admission.Errored(http.StatusInternalServerError, err)
		_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{Response: &resp.AdmissionResponse})
	}
}
