package server

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// managerWithConfig is a manager as directClient sees it: its rest config, scheme and mapper. Any other
// call panics, so a fallback to the manager's cached client cannot pass unnoticed.
type managerWithConfig struct {
	ctrl.Manager
	cfg *rest.Config
}

func (m managerWithConfig) GetConfig() *rest.Config        { return m.cfg }
func (m managerWithConfig) GetScheme() *runtime.Scheme     { return clientgoscheme.Scheme }
func (m managerWithConfig) GetRESTMapper() meta.RESTMapper { return meta.NewDefaultRESTMapper(nil) }

// TestDirectClientError: a client that cannot be made is an error for the caller, not the cache.
func TestDirectClientError(t *testing.T) {
	bad := &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not a certificate")}}
	c, err := directClient(managerWithConfig{cfg: bad})
	if err == nil || c != nil {
		t.Fatalf("directClient = %v, %v; want an error and no client", c, err)
	}
	if !strings.Contains(err.Error(), "reads the API server directly") {
		t.Errorf("error does not say which client: %v", err)
	}

	good := &rest.Config{Host: "https://127.0.0.1:6443"}
	if c, err := directClient(managerWithConfig{cfg: good}); err != nil || c == nil {
		t.Errorf("directClient with a valid config = %v, %v", c, err)
	}
}
