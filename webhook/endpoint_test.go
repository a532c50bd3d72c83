package webhook

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// readBody must return the body whole whatever length the request declared, and pass read errors on.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("review", 100)
	for _, declared := range []int64{-1, 0, 1, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1, 10 * int64(len(body)), maxReviewBytes} {
		got, err := readBody(strings.NewReader(body), declared)
		if err != nil || string(got) != body {
			t.Errorf("declared %d: got %d bytes, %v; want the %d bytes", declared, len(got), err, len(body))
		}
	}
	broken := errors.New("connection reset")
	for _, declared := range []int64{-1, int64(len(body))} {
		if _, err := readBody(io.MultiReader(strings.NewReader(body[:10]), errReader{broken}), declared); !errors.Is(err, broken) {
			t.Errorf("declared %d: a read error gave %v", declared, err)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
