package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/wincompat/wincompat/patch"
	"github.com/wincompat/wincompat/policy"
)

// Paths the handlers are served on (DESIGN §7).
const (
	PodPath      = "/mutate-pod"
	WorkloadPath = "/mutate-workload"
)

// Resources each path accepts: a webhook configuration that sends anything else is a mistake, and the
// handler says so instead of guessing.
var (
	podResources = map[string]bool{"pods": true, "pods/ephemeralcontainers": true}

	workloadResources = map[string]bool{
		"deployments": true, "replicasets": true, "statefulsets": true, "daemonsets": true,
		"jobs": true, "cronjobs": true, "replicationcontrollers": true, "podtemplates": true,
	}
)

// NamespaceReader reads the labels and annotations of a namespace, normally from an informer cache.
type NamespaceReader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// ClusterReader returns the facts of the cluster (Windows builds of ready nodes, RuntimeClasses).
type ClusterReader func(ctx context.Context) (*policy.Cluster, error)

// Handler answers admission reviews for one path with the policy.
type Handler struct {
	resources      map[string]bool
	policy         *atomic.Pointer[policy.Policy]
	namespaces     NamespaceReader
	namespacesLive NamespaceReader
	cluster        ClusterReader
	images         ImageResolver
	version        string
	metrics        *Metrics
	log            logr.Logger
}

// Config is what both handlers share.
type Config struct {
	// Policy is read on every review, so a reload takes effect at once.
	Policy     *atomic.Pointer[policy.Policy]
	Namespaces NamespaceReader
	// NamespacesLive reads the API server directly, for a namespace the cache has not seen yet; nil to
	// rely on the cache alone.
	NamespacesLive NamespaceReader
	// Cluster is nil for offline use: no build from the cluster, and RuntimeClasses are assumed to exist.
	Cluster ClusterReader
	// Images, when set, reads the Windows builds of a pod's images from their registries; nil leaves the
	// build to tags and the other sources.
	Images  ImageResolver
	Version string
	Metrics *Metrics
	Log     logr.Logger
}

// NewPodHandler serves /mutate-pod: Pods on CREATE and pods/ephemeralcontainers.
func NewPodHandler(c Config) *Handler { return newHandler(c, podResources) }

// NewWorkloadHandler serves /mutate-workload: the pod templates of the eight workload kinds.
func NewWorkloadHandler(c Config) *Handler { return newHandler(c, workloadResources) }

func newHandler(c Config, resources map[string]bool) *Handler {
	return &Handler{resources: resources, policy: c.Policy, namespaces: c.Namespaces, namespacesLive: c.NamespacesLive,
		cluster: c.Cluster, images: c.Images, version: c.Version, metrics: c.Metrics, log: c.Log}
}

// Handle implements admission.Handler. Reviews it cannot understand are errors (the API server then
// applies failurePolicy); objects it is not configured for are allowed unchanged with a warning, since
// refusing them would block resources wincompat has no business with.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resource := req.Resource.Resource
	if req.SubResource != "" {
		resource += "/" + req.SubResource
	}
	result, resp, decision := h.handle(ctx, req, resource)
	h.metrics.observe(boundedResource(resource, h.resources), string(req.Operation), result, time.Since(start).Seconds(), decision)
	return resp
}

func (h *Handler) handle(ctx context.Context, req admission.Request, resource string) (string, admission.Response, policy.Decision) {
	if !h.resources[resource] {
		return "ignored", allowedWithWarning(fmt.Sprintf("wincompat: this webhook path does not handle %s; check the MutatingWebhookConfiguration rules", resource)), policy.Decision{}
	}
	if len(req.Object.Raw) == 0 || string(req.Object.Raw) == "null" {
		return "error", admission.Errored(http.StatusBadRequest, errors.New("the review has no object")), policy.Decision{}
	}
	op := policy.Operation(req.Operation)
	if op != policy.Create && op != policy.Update {
		return "ignored", admission.Allowed(""), policy.Decision{}
	}
	ns, err := h.namespace(ctx, req.Namespace)
	if err != nil {
		h.log.Error(err, "reading namespace", "namespace", req.Namespace)
		return "error", admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading namespace %s: %w", req.Namespace, err)), policy.Decision{}
	}
	facts := policy.Facts{Operation: op, Namespace: ns, Version: h.version}
	if h.cluster != nil {
		if facts.Cluster, err = h.cluster(ctx); err != nil {
			h.log.Error(err, "reading cluster inventory")
			return "error", admission.Errored(http.StatusInternalServerError, err), policy.Decision{}
		}
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	res, err := MutateResolving(ctx, h.policy.Load(), gvk, req.Object.Raw, facts, h.images)
	var unsupported *policy.UnsupportedKindError
	switch {
	case errors.As(err, &unsupported):
		return "ignored", allowedWithWarning("wincompat: " + err.Error()), policy.Decision{}
	case err != nil:
		return "error", admission.Errored(http.StatusBadRequest, err), policy.Decision{}
	}
	if !res.Decision.Handled() {
		return "skipped", admission.Allowed(""), res.Decision
	}
	if res.Decision.Denied != "" {
		h.log.Info("denied", "namespace", req.Namespace, "kind", req.Kind.Kind, "name", res.Name, "reason", res.Decision.Denied)
		return "denied", admission.Denied(res.Decision.Denied), res.Decision
	}
	warnings := res.Decision.Warnings()
	if len(res.Patch) == 0 {
		resp := admission.Allowed("")
		resp.Warnings = warnings
		if res.Kind != "" && res.Decision.Windows {
			// The API server sends webhooks its object rendered as JSON, where an empty list is left
			// out, but validates the object it holds, where "supplementalGroups: []" is still a
			// Linux-only field. Only a patch makes it decode the object again from JSON, so a Windows
			// object gets one that changes nothing: a test of its own kind.
			resp.Patch = unchangedPatch(res.Kind)
			resp.PatchType = new(admissionv1.PatchTypeJSONPatch)
		}
		return "unchanged", resp, res.Decision
	}
	patch, err := res.Patch.MarshalJSON()
	if err != nil {
		return "error", admission.Errored(http.StatusInternalServerError, err), res.Decision
	}
	h.log.Info("mutated", "namespace", req.Namespace, "kind", req.Kind.Kind, "name", res.Name,
		"changes", len(res.Decision.Changes), "build", res.Decision.Build, "dryRun", req.DryRun != nil && *req.DryRun)
	return "mutated", admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed:          true,
		Patch:            patch,
		PatchType:        new(admissionv1.PatchTypeJSONPatch),
		Warnings:         warnings,
		AuditAnnotations: auditAnnotations(res.Decision),
	}}, res.Decision
}

func (h *Handler) namespace(ctx context.Context, name string) (policy.Namespace, error) {
	var ns corev1.Namespace
	err := h.namespaces.Get(ctx, client.ObjectKey{Name: name}, &ns)
	if apierrors.IsNotFound(err) && h.namespacesLive != nil {
		// The webhook configuration sent us this review because the namespace is labelled, so it exists:
		// the cache has not caught up with a namespace created a moment ago. Ask the API server rather
		// than pass a Windows pod through unchanged.
		err = h.namespacesLive.Get(ctx, client.ObjectKey{Name: name}, &ns)
	}
	if apierrors.IsNotFound(err) {
		return policy.Namespace{Name: name}, nil
	}
	if err != nil {
		return policy.Namespace{}, err
	}
	return policy.Namespace{Name: name, Labels: ns.Labels, Annotations: ns.Annotations}, nil
}

// auditAnnotations put this pass's changes into the API server's audit log; the API server prefixes the
// keys with the webhook's name.
func auditAnnotations(d policy.Decision) map[string]string {
	a := map[string]string{"changes": d.ChangesJSON()}
	if d.Build != "" {
		a["build"] = d.Build
		a["build-source"] = d.BuildSource
	}
	return a
}

func unchangedPatch(kind string) []byte {
	p, _ := patch.Patch{{Op: "test", Path: "/kind", Value: kind}}.MarshalJSON() // a string always encodes
	return p
}

func allowedWithWarning(w string) admission.Response {
	resp := admission.Allowed("")
	resp.Warnings = []string{w}
	return resp
}

// boundedResource keeps the metric label bounded when a misconfiguration sends unexpected resources.
func boundedResource(resource string, known map[string]bool) string {
	if known[resource] {
		return resource
	}
	return "other"
}
