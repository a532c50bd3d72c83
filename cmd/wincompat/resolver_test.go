package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wincompat/wincompat/webhook/scheduling/images"
)

// The CLI reads the user's docker config: a refusal says how to log in, not the chart's pull secret.
func TestCLIResolverUnauthorizedHint(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer registry.Close()
	r, err := newCLIResolver(10*time.Second, "acr,ecr,gar")
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(registry.URL, "http://")
	image := host + "/app:1"
	got := r.Lookup(context.Background(), images.Request{Images: []string{image}})[image]
	if want := host + ": no such image, or not readable with the credentials wincompat may use for this pod (log in with docker login or crane auth login)"; got.Err != want {
		t.Errorf("Err %q, want %q", got.Err, want)
	}
}
