package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/wincompat/wincompat/webhook/bytebudget"
)

// maxReviewBytes is controller-runtime's limit on a review body, so that an oversized review gets the
// answer (413) controller-runtime's own webhook would give it.
const maxReviewBytes = 7 << 20

// Endpoint serves an admission.Handler over HTTP as controller-runtime's admission.Webhook does (the
// same body limit, content type check, panic recovery, logging and response), but decodes the review
// in one pass: controller-runtime's codec reads the whole body once only to find apiVersion and kind,
// then again to decode it, while one pass can read apiVersion and kind along with the rest (readReview).
type Endpoint struct {
	webhook admission.Webhook
	limits  Limits
}

// Limits bound what one review may hold, because whoever reaches the port chooses how big a body is,
// how slowly it arrives and how many arrive at once. Zero fields bound nothing (tests, benchmarks).
type Limits struct {
	// Budget is shared by the endpoints of a server: the memory reviews hold at once, their bodies as
	// they arrive, then what answering them holds (DecodeFactor, ObjectBytes), since whoever reaches the
	// port chooses how many bodies arrive at once and how big they are. A review reserves what it has
	// read, as it arrives, until it is answered; one that would go past the budget is answered 429 at
	// once, and its connection closed; one needing more than all of it always is. Nil bounds nothing.
	Budget *bytebudget.Budget
	// ReadTimeout bounds reading one body: a peer that sends all but its last byte and waits is cut off.
	ReadTimeout time.Duration
	// ReviewTimeout bounds answering one review: the API server waits at most the webhook's
	// timeoutSeconds (30 at most), and work past that helps no one.
	ReviewTimeout time.Duration
	// DecodeFactor is the memory answering a review holds per byte of its body, reserved in Budget once
	// the body is read (PodDecodeFactor, PolicyDecodeFactor); 0 or 1 reserves only the body.
	DecodeFactor int64
	// ObjectBytes is the memory answering a review holds per JSON object of its body, at most; reserved
	// when that is more than DecodeFactor's (PodObjectBytes). 0 reserves nothing per object.
	ObjectBytes int64
}

// Memory held per byte of a review's body while it is answered, measured with `make hostile`
// (test/lab/README.md, "hostile"): a pod of 4,000 containers (3.6 MiB) held about 11 times its
// body, a 256 KiB policy of hostile keys about 22 times.
const (
	PodDecodeFactor    = 12
	PolicyDecodeFactor = 24
)

// PodObjectBytes is what one JSON object of a pod or workload review may hold while it is answered: a
// pod of 250,000 containers {"name":"a"} is a 3.2 MiB body that decodes into 250,000 Containers of
// 408 bytes each, grown a quarter at a time (the old and the new array held together), copied once for
// the decision and once more as maps by the diff. It allocated 739 MB (227 times its body) where
// PodDecodeFactor reserved 39 MB. An object decodes into at most one such struct, so counting objects
// bounds what the smallest JSON can make the decoder hold.
const PodObjectBytes = 2 << 10

// jsonObjects counts the objects of a JSON text: its '{' outside strings. Counting needs no decoding,
// so a body can be refused before anything of it is built; a malformed body is counted all the same and
// refused by the decoder after.
func jsonObjects(body []byte) int64 {
	var n int64
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case inString && c == '\\':
			i++ // the escaped character, which may be a quote
		case c == '"':
			inString = !inString
		case !inString && c == '{':
			n++
		}
	}
	return n
}

// NewEndpoint returns h served over HTTP, with no limits but the body size.
func NewEndpoint(h admission.Handler) *Endpoint {
	return &Endpoint{webhook: admission.Webhook{Handler: h}}
}

// WithLimits returns e bounded by l.
func (e *Endpoint) WithLimits(l Limits) *Endpoint {
	e.limits = l
	return e
}

var reviewV1 = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		e.fail(w, http.StatusBadRequest, errors.New("request body is empty"))
		return
	}
	defer r.Body.Close()
	if e.limits.ReadTimeout > 0 {
		// Ignored where the connection cannot set one (a test's recorder); the server sets its own too.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(e.limits.ReadTimeout))
	}
	ctx := r.Context()
	if e.limits.ReviewTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.limits.ReviewTimeout)
		defer cancel()
	}
	limited := &io.LimitedReader{R: r.Body, N: maxReviewBytes}
	held := e.limits.Budget.Reserve("")
	defer held.Release()
	body, err := readBody(limited, r.ContentLength, held)
	var over *overBudgetError
	switch {
	case errors.As(err, &over):
		w.Header().Set("Connection", "close") // the rest of its body is not read
		e.fail(w, http.StatusTooManyRequests, err)
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		e.fail(w, http.StatusRequestTimeout, fmt.Errorf("the review's body did not arrive within %v", e.limits.ReadTimeout))
		return
	case err != nil:
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
	// Answering holds far more than the body: the decoded review, the typed object, its copy and the
	// diff. Reserve that too before any of it is built: by the body's size, or by its objects when they
	// are many and small.
	need := int64(len(body)) * max(e.limits.DecodeFactor, 1)
	if e.limits.ObjectBytes > 0 {
		need = max(need, jsonObjects(body)*e.limits.ObjectBytes)
	}
	if !held.GrowTo(need) {
		e.refuse(w, body, http.StatusTooManyRequests, overBudget(held))
		return
	}
	req := admission.Request{}
	gvk, err := readReview(body, &req.AdmissionRequest)
	if err != nil {
		e.fail(w, http.StatusBadRequest, err)
		return
	}
	resp := e.webhook.Handle(withCaller(ctx, r), req)
	out := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	if gvk.Empty() {
		gvk = reviewV1
	}
	out.SetGroupVersionKind(gvk)
	e.write(w, out)
}

// readBody reads the whole body, growing its buffer with what has arrived (never to a length only
// declared: a peer may declare 7 MiB and send one byte) and reserving each growth in held. A body whose
// declared length is right fits a buffer of exactly that length, so an honest review is copied as few
// times as a growing buffer allows.
func readBody(r io.Reader, declared int64, held *bytebudget.Reservation) ([]byte, error) {
	const first = 16 << 10
	size := int64(first)
	if declared > 0 && declared < size {
		size = declared + 1 // one byte more: a body that ends where it said fills all but that byte
	}
	if !held.Grow(size) {
		return nil, overBudget(held)
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			next := int64(2 * cap(buf))
			if declared > int64(len(buf)) && declared+1 < next {
				next = declared + 1
			}
			if !held.Grow(next) {
				return nil, overBudget(held)
			}
			buf = append(make([]byte, 0, next), buf...)
			held.ShrinkTo(next)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
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

// refuse answers a review whose body was read but that will not be decoded, in its own version and with
// its uid when the body names them: the API server takes an answer without its review's uid for a broken
// webhook, and would report that instead of the reason. Finding them costs a scan of the body and next to
// no memory: every other field is skipped.
func (e *Endpoint) refuse(w http.ResponseWriter, body []byte, code int32, err error) {
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Request    struct {
			UID types.UID `json:"uid"`
		} `json:"request"`
	}
	if json.Unmarshal(body, &review) != nil || review.Request.UID == "" || review.Kind != reviewV1.Kind {
		e.fail(w, code, err)
		return
	}
	resp := admission.Errored(code, err)
	resp.UID = review.Request.UID
	out := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	out.APIVersion, out.Kind = review.APIVersion, review.Kind
	e.write(w, out)
}

func (e *Endpoint) write(w http.ResponseWriter, review admissionv1.AdmissionReview) {
	if err := json.NewEncoder(w).Encode(review); err != nil {
		// Most likely the connection broke: one attempt at saying so, as controller-runtime makes.
		resp := admission.Errored(http.StatusInternalServerError, err)
		_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{Response: &resp.AdmissionResponse})
	}
}
