package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/rest"

	"github.com/wincompat/wincompat/policy"
)

// The server always configures the pods' pull secrets, but only a lookup that carries their names (the
// policy's podImagePullSecrets) may suggest them.
func TestImageResolverUnauthorizedHint(t *testing.T) {
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer registry.Close()
	// An API server without the pod's pull secret: a missing Secret is skipped, not an error.
	apiserver := httptest.NewServer(http.NotFoundHandler())
	defer apiserver.Close()
	r, err := newImageResolver(&rest.Config{Host: apiserver.URL}, nil, nil, "wincompat-system", ImageOptions{Timeout: 5 * time.Second, AllowPrivateNetworks: true}, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(registry.URL, "http://")
	image := host + "/app:1"
	for _, tc := range []struct {
		name    string
		secrets []string
		want    string
	}{
		{"pod's pull secrets not used", nil, host + ": no such image, or not readable with the credentials wincompat may use for this pod (set imageResolver.pullSecret)"},
		{"pod's pull secrets used", []string{"regcred"}, host + ": no such image, or not readable with the credentials wincompat may use for this pod (set imageResolver.pullSecret or the pod's imagePullSecrets)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := policy.ImageRequest{Namespace: "team", Authenticated: true, PullSecrets: tc.secrets, Images: []string{image}}
			if got := r.Lookup(context.Background(), req)[image]; got.Err != tc.want {
				t.Errorf("Err %q, want %q", got.Err, tc.want)
			}
		})
	}
}
