package webhook

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/wincompat/wincompat/webhook/bytebudget"
)

// readBody must return the body whole whatever length the request declared, and pass read errors on.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("review", 100)
	for _, declared := range []int64{-1, 0, 1, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1, 10 * int64(len(body)), maxReviewBytes} {
		got, err := readBody(strings.NewReader(body), declared, &bytebudget.Reservation{})
		if err != nil || string(got) != body {
			t.Errorf("declared %d: got %d bytes, %v; want the %d bytes", declared, len(got), err, len(body))
		}
	}
	broken := errors.New("connection reset")
	for _, declared := range []int64{-1, int64(len(body))} {
		if _, err := readBody(io.MultiReader(strings.NewReader(body[:10]), errReader{broken}), declared, &bytebudget.Reservation{}); !errors.Is(err, broken) {
			t.Errorf("declared %d: a read error gave %v", declared, err)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// A peer that declares 7 MiB and sends a little holds what it sent, not what it declared.
func TestReadBodyReservesWhatArrived(t *testing.T) {
	held := bytebudget.New(MinBudget).Reserve("")
	peek := &peekingReader{r: strings.NewReader(strings.Repeat("x", 100)), held: held}
	if _, err := readBody(peek, maxReviewBytes-1, held); err != nil {
		t.Fatal(err)
	}
	if peek.most > 64<<10 {
		t.Errorf("%d bytes reserved while reading a body of 100 that declared 7 MiB", peek.most)
	}
	held.Release()
	if !held.Budget().Reserve("").Grow(MinBudget) {
		t.Error("the reservation was not given back whole")
	}
}

type peekingReader struct {
	r    io.Reader
	held *bytebudget.Reservation
	most int64
}

func (p *peekingReader) Read(b []byte) (int, error) {
	p.most = max(p.most, p.held.Held())
	return p.r.Read(b)
}

// Bodies held at once stay within the budget: past it a review is answered 429 at once, and a review
// that arrives after the others are answered gets through again.
func TestEndpointBudget(t *testing.T) {
	budget := bytebudget.New(1 << 20)
	e := NewEndpoint(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})).WithLimits(Limits{Budget: budget})
	post := func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, PodPath, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		e.ServeHTTP(w, r)
		return w
	}
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1"}}`
	others := budget.Reserve("")
	if !others.Grow(1<<20 - 1<<10) { // other reviews in flight hold all but 1 KiB
		t.Fatal("budget")
	}
	if w := post(review + strings.Repeat(" ", 4<<10)); !strings.Contains(w.Body.String(), `"code":429`) || w.Header().Get("Connection") != "close" {
		t.Errorf("a review past the budget: %s %v", w.Body, w.Header())
	}
	others.Release()
	if w := post(review); !strings.Contains(w.Body.String(), `"allowed":true`) {
		t.Errorf("a review within the budget: %s", w.Body)
	}
	if !budget.Reserve("").Grow(1 << 20) {
		t.Error("answered reviews still hold part of the budget")
	}
}

// A peer that sends all but the last byte of its body and waits is answered 408 once the read deadline
// passes, instead of holding its connection and buffer for as long as it likes.
func TestEndpointReadDeadline(t *testing.T) {
	e := NewEndpoint(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})).WithLimits(Limits{ReadTimeout: 100 * time.Millisecond})
	srv := httptest.NewServer(e)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"apiVersion\":", PodPath)
	// Without a deadline the server waits for the other 986 bytes forever; this one only bounds the test.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code":408`) {
		t.Errorf("answer: %s", body)
	}
}

// Answering a review holds many times its body (decoded, copied, diffed): that is reserved before any
// of it is built, so that many large reviews at once are refused instead of meeting the OOM killer.
func TestEndpointReservesWhatAnsweringHolds(t *testing.T) {
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","object":{"padding":"` + strings.Repeat("x", 100<<10) + `"}}}`
	for _, tc := range []struct {
		factor  int64
		allowed bool
	}{{1, true}, {PodDecodeFactor, false}} {
		budget := bytebudget.New(1 << 20)
		e := NewEndpoint(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		})).WithLimits(Limits{Budget: budget, DecodeFactor: tc.factor})
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, PodPath, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		e.ServeHTTP(w, r)
		// A refusal names the review's uid and version, or the API server reports a broken webhook instead.
		if got := strings.Contains(w.Body.String(), `"allowed":true`); got != tc.allowed || !tc.allowed && (!strings.Contains(w.Body.String(), `"code":429`) ||
			!strings.Contains(w.Body.String(), `"uid":"1"`) || !strings.Contains(w.Body.String(), `"apiVersion":"admission.k8s.io/v1"`)) {
			t.Errorf("a 100 KiB review, factor %d, 1 MiB budget: %.200s", tc.factor, w.Body)
		}
		if !budget.Reserve("").Grow(1 << 20) {
			t.Errorf("factor %d: the review still holds part of the budget", tc.factor)
		}
	}
}

func TestJSONObjects(t *testing.T) {
	for body, want := range map[string]int64{
		`{}`:                          1,
		`[{},{"a":{}}]`:               3,
		`{"a":"{{{"}`:                 1,
		`{"a":"\"{","b":"\\"}`:        1,
		`{"a":"\\\"{\\"}`:             1,
		`"{"`:                         0,
		`{"unterminated":"{{`:         1,
		`{"k{":[{"x":"}"},{}],"":{}}`: 4,
	} {
		if got := jsonObjects([]byte(body)); got != want {
			t.Errorf("jsonObjects(%s) = %d, want %d", body, got, want)
		}
	}
}

// A pod of 250,000 containers {"name":"a"} is a 3.2 MiB review that made answering it allocate 739 MB
// (issue 40): the reservation by size (12 times the body, 39 MB) let it through a 96 MiB budget. Its
// objects reserve 2 KiB each, so it is refused before anything of it is decoded, while the largest
// chart pods still fit.
func TestEndpointReservesPerObject(t *testing.T) {
	var containers strings.Builder
	for i := range 250000 {
		if i > 0 {
			containers.WriteByte(',')
		}
		containers.WriteString(`{"name":"a"}`)
	}
	tiny := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","object":{"apiVersion":"v1","kind":"Pod","spec":{"os":{"name":"windows"},"containers":[` + containers.String() + `]}}}}`
	budget := bytebudget.New(96 << 20)
	decoded := false
	e := NewEndpoint(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		decoded = true
		return admission.Allowed("")
	})).WithLimits(Limits{Budget: budget, DecodeFactor: PodDecodeFactor, ObjectBytes: PodObjectBytes})
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, PodPath, strings.NewReader(tiny))
	r.Header.Set("Content-Type", "application/json")
	e.ServeHTTP(w, r)
	if decoded || !strings.Contains(w.Body.String(), `"code":429`) {
		t.Errorf("a review of 250,000 one-field containers was answered: %.200s", w.Body)
	}
	all := budget.Reserve("")
	if !all.Grow(96 << 20) {
		t.Error("the refused review still holds part of the budget")
	}
	all.Release()

	// The largest pod of the benchmarks, 64 containers of a chart's shape, reserves what its size does.
	body := reviewBody(t, benchPod(64))
	if objects, size := jsonObjects(body)*PodObjectBytes, int64(len(body))*PodDecodeFactor; objects > 4*size {
		t.Errorf("a chart pod of %d bytes reserves %d by its objects, more than 4 times the %d its size does", len(body), objects, size)
	}
}
