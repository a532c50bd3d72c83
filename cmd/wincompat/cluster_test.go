package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
)

// apiServer stands in for an API server only to see which one a command calls, as whom: it answers
// every request 403, and the command fails.
type apiServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []http.Header
}

func startAPIServer(t *testing.T) *apiServer {
	s := &apiServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Header.Clone())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"forbidden"}`))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) take() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.requests
	s.requests = nil
	return r
}

// The commands that read the cluster take kubectl's connection flags with kubectl's meaning: the
// kubeconfig's current context unless --context names another, impersonation with --as and
// --as-group, a token with --token, another address with --server.
func TestKubectlConnectionFlags(t *testing.T) {
	a, b := startAPIServer(t), startAPIServer(t)
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: a, cluster: {server: "`+a.URL+`", insecure-skip-tls-verify: true}}
- {name: b, cluster: {server: "`+b.URL+`", insecure-skip-tls-verify: true}}
users:
- {name: alice, user: {token: alice-token}}
contexts:
- {name: a, context: {cluster: a, user: alice}}
- {name: b, context: {cluster: b, user: alice, namespace: web}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		called *apiServer
		check  func(h http.Header) string
	}{
		{"current context", []string{"nodes"}, a, func(h http.Header) string {
			return expectHeader(h, "Authorization", "Bearer alice-token") + expectHeader(h, "Impersonate-User", "")
		}},
		{"--context", []string{"nodes", "--context", "b"}, b, nil},
		{"--as and --as-group", []string{"audit", "--context=b", "--as", "system:serviceaccount:wincompat-system:wincompat", "--as-group", "system:serviceaccounts", "--as-group", "team"},
			b, func(h http.Header) string {
				return expectHeader(h, "Impersonate-User", "system:serviceaccount:wincompat-system:wincompat") +
					expectHeader(h, "Impersonate-Group", "system:serviceaccounts,team")
			}},
		{"--token", []string{"nodes", "--token", "other"}, a, func(h http.Header) string { return expectHeader(h, "Authorization", "Bearer other") }},
		{"--server", []string{"nodes", "-n", "ignored", "--server", b.URL, "--insecure-skip-tls-verify"}, b, nil},
		{"--cluster", []string{"audit", "--cluster", "b", "-n", "web"}, b, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, "", append(tc.args, "--kubeconfig", kubeconfig)...)
			if code == 0 {
				t.Errorf("exit 0 from a server that refuses everything, stderr:\n%s", errOut)
			}
			other := a
			if tc.called == a {
				other = b
			}
			got, stray := tc.called.take(), other.take()
			if len(got) == 0 || len(stray) != 0 {
				t.Fatalf("%d requests to the server meant, %d to the other", len(got), len(stray))
			}
			if tc.check != nil {
				if msg := tc.check(got[0]); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
	code, _, errOut := runCLI(t, "", "nodes", "--kubeconfig", kubeconfig, "--context", "c")
	if code != 1 || !strings.Contains(errOut, `context "c" does not exist`) {
		t.Errorf("an unknown context: exit %d, %s", code, errOut)
	}
}

func expectHeader(h http.Header, name, want string) string {
	if got := strings.Join(h.Values(name), ","); got != want {
		return name + ": " + got + ", want " + want + "\n"
	}
	return ""
}

// nodes -o json and -o yaml print the shape cmd/wincompat/README.md documents: lists never null, a
// taint's toleration as a field, a build without a catalog class with runtimeClass null.
func TestNodesStructuredOutput(t *testing.T) {
	rows := []inventory.BuildRow{
		{Build: "10.0.20348", Names: []string{"ltsc2022", "2022"}, Nodes: 3, Ready: 2, Archs: []string{"amd64"},
			Taints:       []inventory.NodeTaint{{Taint: "os=windows:NoSchedule", Tolerated: true}, {Taint: "team=a:NoSchedule"}},
			RuntimeClass: "windows-2022", ClassState: "managed"},
		{Build: "10.0.99999", ClassState: "-"},
	}
	var out bytes.Buffer
	if err := writeNodesData(&out, "json", rows, nil); err != nil {
		t.Fatal(err)
	}
	want := `{
    "builds": [
        {
            "build": "10.0.20348",
            "names": [
                "ltsc2022",
                "2022"
            ],
            "nodes": 3,
            "ready": 2,
            "architectures": [
                "amd64"
            ],
            "taints": [
                {
                    "taint": "os=windows:NoSchedule",
                    "tolerated": true
                },
                {
                    "taint": "team=a:NoSchedule",
                    "tolerated": false
                }
            ],
            "runtimeClass": {
                "name": "windows-2022",
                "state": "managed"
            }
        },
        {
            "build": "10.0.99999",
            "names": [],
            "nodes": 0,
            "ready": 0,
            "architectures": [],
            "taints": [],
            "runtimeClass": null
        }
    ],
    "needsAttention": []
}
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if err := writeNodesData(&out, "yaml", rows[1:], []string{"a finding"}); err != nil {
		t.Fatal(err)
	}
	if want := "builds:\n- architectures: []\n  build: 10.0.99999\n  names: []\n  nodes: 0\n  ready: 0\n  runtimeClass: null\n  taints: []\nneedsAttention:\n- a finding\n"; out.String() != want {
		t.Errorf("yaml:\n%s\nwant:\n%s", out.String(), want)
	}
	if code, _, errOut := runCLI(t, "", "nodes", "-o", "wide"); code != 2 || !strings.Contains(errOut, "use table, json or yaml") {
		t.Errorf("-o wide: exit %d, %s", code, errOut)
	}
}
