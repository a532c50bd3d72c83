package main

import (
	"slices"
	"strings"
	"testing"
)

// helm's error output as bin/helm (the version test/go.mod pins) prints it for the chart's schema and
// prerequisite check.
const (
	schemaStderr = `Error: INSTALLATION FAILED: values don't meet the specifications of the schema(s) in the following chart(s):
wincompat:
- at '/engine': value must be one of 'auto', 'webhook', 'hybrid'
- at '/tls/mode': value must be one of 'cert-manager', 'self-managed'
`
	prerequisiteStderr = `Error: INSTALLATION FAILED: execution error at (wincompat/templates/prerequisites.yaml:2:4): this cluster lacks what the release needs:
  - cert-manager.io/v1/Certificate is not served: tls.mode cert-manager (the default) needs cert-manager: install it first (https://cert-manager.io/docs/installation/), or let wincompat issue and rotate its own certificate with --set tls.mode=self-managed
  - monitoring.coreos.com/v1/ServiceMonitor is not served: install it, or set metrics.serviceMonitor.enabled=false

Use --debug flag to render out invalid YAML
`
)

func TestHelmMessage(t *testing.T) {
	for _, tc := range []struct{ name, stderr, long, short string }{
		{"schema", schemaStderr,
			"values don't meet the specifications of the schema(s) in the following chart(s): wincompat: at '/engine': value must be one of 'auto', 'webhook', 'hybrid'; at '/tls/mode': value must be one of 'cert-manager', 'self-managed'",
			"at '/engine': value must be one of 'auto', 'webhook', 'hybrid'; at '/tls/mode': value must be one of 'cert-manager', 'self-managed'"},
		{"prerequisites", prerequisiteStderr,
			"this cluster lacks what the release needs: cert-manager.io/v1/Certificate is not served: tls.mode cert-manager (the default) needs cert-manager: install it first (https://cert-manager.io/docs/installation/), or let wincompat issue and rotate its own certificate with --set tls.mode=self-managed; monitoring.coreos.com/v1/ServiceMonitor is not served: install it, or set metrics.serviceMonitor.enabled=false",
			"cert-manager.io/v1/Certificate is not served: tls.mode cert-manager needs cert-manager: install it first, or let wincompat issue and rotate its own certificate with --set tls.mode=self-managed; monitoring.coreos.com/v1/ServiceMonitor is not served: install it, or set metrics.serviceMonitor.enabled=false"},
		{"not the chart's", "Error: INSTALLATION FAILED: Kubernetes cluster unreachable: connection refused\n",
			"Kubernetes cluster unreachable: connection refused", "Kubernetes cluster unreachable: connection refused"},
		// The Deployment's engine reason offline: "(helm template)" is what the line's label says, the API
		// group of the kind in words goes, the one for --api-versions stays.
		{"engine reason",
			"engine is auto and offline rendering (helm template) cannot see whether the cluster serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: pass --api-versions admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
			"engine is auto and offline rendering (helm template) cannot see whether the cluster serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: pass --api-versions admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
			"engine is auto and offline rendering cannot see whether the cluster serves MutatingAdmissionPolicy: pass --api-versions admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"},
		{"nothing", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			long := helmMessage(tc.stderr)
			if long != tc.long {
				t.Errorf("helmMessage:\n got %s\nwant %s", long, tc.long)
			}
			if short := shortenHelm(long); short != tc.short {
				t.Errorf("shortenHelm:\n got %s\nwant %s", short, tc.short)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		s     string
		width int
		want  []string
	}{
		{"one two three", 20, []string{"one two three"}},
		{"one two three", 7, []string{"one two", "  three"}},
		{"one two three four", 9, []string{"one two", "  three", "  four"}},
		// A word longer than the width stays whole, on a line of its own.
		{"a admissionregistration.k8s.io/v1/MutatingAdmissionPolicy b", 10, []string{"a", "  admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", "  b"}},
		{"  spaced   out  ", 40, []string{"spaced out"}},
		{"", 10, nil},
	} {
		if got := wrap(tc.s, tc.width, "  "); !slices.Equal(got, tc.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", tc.s, tc.width, got, tc.want)
		}
	}
}

func TestReadRendering(t *testing.T) {
	manifest := `---
# Source: wincompat/templates/serviceaccount.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: wincompat
---
# Source: wincompat/templates/deployment.yaml
# wincompat engine hybrid, because the API server serves it.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: wincompat
  annotations:
    wincompat.io/engine: hybrid
    wincompat.io/engine-reason: "engine is auto: it is served"
---
# Source: wincompat/templates/empty.yaml
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: wincompat-pods
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: wincompat-pods-default-os
`
	r, err := readRendering([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	want := rendering{objects: 4, bindings: 2, engine: "hybrid", reason: "engine is auto: it is served"}
	if r != want {
		t.Errorf("readRendering = %+v, want %+v", r, want)
	}

	// Without the annotated Deployment the demo has nothing to say, and says so.
	noDeployment := manifest[:strings.Index(manifest, "# Source: wincompat/templates/deployment.yaml")]
	if _, err := readRendering([]byte(noDeployment)); err == nil || !strings.Contains(err.Error(), "no Deployment annotated") {
		t.Errorf("readRendering without the Deployment: %v, want an error naming it", err)
	}
	if _, err := readRendering([]byte("kind: [")); err == nil {
		t.Error("readRendering of broken YAML: no error")
	}
}
