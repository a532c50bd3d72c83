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

// Paths the handlers are served on (deploy/webhook names them).
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
	gate           bool
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
	Images ImageResolver
	// ImageMode is how Images is read (ImageModes); "" is ImageModeLookup.
	ImageMode string
	Version   string
	Metrics   *Metrics
	Log       logr.Logger
}

// NewPodHandler serves /mutate-pod: Pods on CREATE and pods/ephemeralcontainers.
func NewPodHandler(c Config) *Handler { return newHandler(c, podResources) }

// NewWorkloadHandler serves /mutate-workload: the pod templates of the eight workload kinds.
func NewWorkloadHandler(c Config) *Handler { return newHandler(c, workloadResources) }

func newHandler(c Config, resources map[string]bool) *Handler {
	images := resolverFor(c.ImageMode, c.Images)
	return &Handler{resources: resources, policy: c.Policy, namespaces: c.Namespaces, namespacesLive: c.NamespacesLive,
		cluster: c.Cluster, images: images, gate: images != nil && c.ImageMode != ImageModeFallback,
		version: c.Version, metrics: c.Metrics, log: c.Log}
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
	pol := h.policy.Load()
	o := h.handle(ctx, pol, req, resource)
	if o.mode == "" {
		o.mode = pol.Mode
	}
	h.metrics.observe(pol, boundedResource(resource, h.resources), string(req.Operation), o.result, o.mode, time.Since(start).Seconds(), o.decision)
	h.metrics.gatedPod(o.gated)
	return o.resp
}

// outcome is one review's answer and what the metrics say of it. mode is empty until the namespace,
// and with it the mode, is known.
type outcome struct {
	result   string
	mode     string
	resp     admission.Response
	decision policy.Decision
	// gated is why the pod was admitted behind the gate (gateReason), "" when it was not.
	gated string
}

func (h *Handler) handle(ctx context.Context, pol *policy.Policy, req admission.Request, resource string) outcome {
	if !h.resources[resource] {
		return outcome{result: "ignored", resp: allowedWithWarning(fmt.Sprintf("wincompat: this webhook path does not handle %s; check the MutatingWebhookConfiguration rules", resource))}
	}
	if len(req.Object.Raw) == 0 || string(req.Object.Raw) == "null" {
		return outcome{result: "error", resp: admission.Errored(http.StatusBadRequest, errors.New("the review has no object"))}
	}
	op := policy.Operation(req.Operation)
	if op != policy.Create && op != policy.Update {
		return outcome{result: "ignored", resp: admission.Allowed("")}
	}
	ns, err := h.namespace(ctx, req.Namespace)
	if err != nil {
		h.log.Error(err, "reading namespace", "namespace", req.Namespace)
		return outcome{result: "error", resp: admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading namespace %s: %w", req.Namespace, err))}
	}
	mode, modeNote := pol.ModeFor(ns)
	o := h.decide(ctx, pol, req, ns, op, mode == policy.ModeWarn)
	o.mode = mode
	if modeNote != "" && (o.decision.Handled() || len(o.resp.Warnings) > 0) {
		o.resp.Warnings = append(o.resp.Warnings, "wincompat: "+modeNote)
	}
	return o
}

// decide answers a review of an object in ns. In warn mode (warnOnly) it decides as in enforce mode and
// answers with what it would have done, changing nothing.
func (h *Handler) decide(ctx context.Context, pol *policy.Policy, req admission.Request, ns policy.Namespace, op policy.Operation, warnOnly bool) outcome {
	facts := policy.Facts{Operation: op, Namespace: ns, Version: h.version, Gate: h.gate}
	var err error
	if h.cluster != nil {
		if facts.Cluster, err = h.cluster(ctx); err != nil {
			h.log.Error(err, "reading cluster inventory")
			return outcome{result: "error", resp: admission.Errored(http.StatusInternalServerError, err)}
		}
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	res, err := MutateResolving(ctx, pol, gvk, req.Object.Raw, facts, h.images)
	var unsupported *policy.UnsupportedKindError
	switch {
	case errors.As(err, &unsupported):
		return outcome{result: "ignored", resp: allowedWithWarning("wincompat: " + err.Error())}
	case err != nil:
		return outcome{result: "error", resp: admission.Errored(http.StatusBadRequest, err)}
	}
	if !res.Decision.Handled() {
		return outcome{result: "skipped", resp: admission.Allowed(""), decision: res.Decision}
	}
	if warnOnly {
		return h.warn(req, res)
	}
	if res.Decision.Denied != "" {
		h.log.Info("denied", "namespace", req.Namespace, "kind", req.Kind.Kind, "name", res.Name, "reason", res.Decision.DeniedMessage())
		return outcome{result: "denied", resp: admission.Denied(res.Decision.DeniedMessage()), decision: res.Decision}
	}
	// What the admission policies changed in this request is in the record alone: reported with what
	// this pass changed, the warnings are the same whichever engine changed the object.
	warnings := res.Decision.Reporting(recordNews(req, gvk, op, res.Record)).Warnings()
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
		return outcome{result: "unchanged", resp: resp, decision: res.Decision}
	}
	patch, err := res.Patch.MarshalJSON()
	if err != nil {
		return outcome{result: "error", resp: admission.Errored(http.StatusInternalServerError, err), decision: res.Decision}
	}
	h.log.Info("mutated", "namespace", req.Namespace, "kind", req.Kind.Kind, "name", res.Name,
		"changes", len(res.Decision.Changes), "build", res.Decision.Build, "gated", res.GateReason, "dryRun", req.DryRun != nil && *req.DryRun)
	o := outcome{result: "mutated", decision: res.Decision, resp: admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed:          true,
		Patch:            patch,
		PatchType:        new(admissionv1.PatchTypeJSONPatch),
		Warnings:         warnings,
		AuditAnnotations: auditAnnotations(res.Decision, ""),
	}}}
	if res.GateReason != "" {
		o.gated = res.GateReason
		o.resp.AuditAnnotations["gated"] = res.GateReason
	}
	return o
}

// warn answers in warn mode: the object is admitted as it came (the API server's own validation still
// applies), and the warnings and audit annotations carry what enforce mode would have done. The result
// is what enforce mode's would have been, so that the metrics of a staged rollout compare.
func (h *Handler) warn(req admission.Request, res Result) outcome {
	resp := admission.Allowed("")
	resp.Warnings = res.Decision.WouldWarnings()
	if res.Decision.Denied != "" {
		resp.AuditAnnotations = map[string]string{"mode": policy.ModeWarn, "would-deny": res.Decision.DeniedMessage()}
		return outcome{result: "denied", resp: resp, decision: res.Decision}
	}
	if len(res.Patch) == 0 {
		return outcome{result: "unchanged", resp: resp, decision: res.Decision}
	}
	h.log.Info("would mutate", "namespace", req.Namespace, "kind", req.Kind.Kind, "name", res.Name,
		"changes", len(res.Decision.Changes), "build", res.Decision.Build)
	resp.AuditAnnotations = auditAnnotations(res.Decision, "would-")
	resp.AuditAnnotations["mode"] = policy.ModeWarn
	return outcome{result: "mutated", resp: resp, decision: res.Decision}
}

// recordNews are the changes of the object's record as it arrived that the stored object's record does not
// hold (policy.RecordNews): on CREATE all of it, on UPDATE what was added since. A stored object that
// cannot be read gives none: its record cannot tell what is new.
func recordNews(req admission.Request, gvk schema.GroupVersionKind, op policy.Operation, arrived string) []policy.Change {
	if arrived == "" {
		return nil
	}
	stored := ""
	if op == policy.Update {
		var ok bool
		if stored, ok = storedRecord(gvk, req.OldObject.Raw); !ok {
			return nil
		}
	}
	return policy.RecordNews(arrived, stored)
}

// ReadNamespace reads namespace name from cache, and from live (the API server; nil for none) when the
// cache has not seen it. The webhook configurations send a review because its namespace is labelled, so
// it exists: the cache has not caught up with a namespace created a moment ago. Asking the API server
// then beats passing a Windows pod through unchanged, or without the warning it should get.
func ReadNamespace(ctx context.Context, cache, live NamespaceReader, name string) (*corev1.Namespace, error) {
	var ns corev1.Namespace
	err := cache.Get(ctx, client.ObjectKey{Name: name}, &ns)
	if apierrors.IsNotFound(err) && live != nil {
		err = live.Get(ctx, client.ObjectKey{Name: name}, &ns)
	}
	return &ns, err
}

func (h *Handler) namespace(ctx context.Context, name string) (policy.Namespace, error) {
	ns, err := ReadNamespace(ctx, h.namespaces, h.namespacesLive, name)
	if apierrors.IsNotFound(err) {
		return policy.Namespace{Name: name}, nil
	}
	if err != nil {
		return policy.Namespace{}, err
	}
	return policy.Namespace{Name: name, Labels: ns.Labels, Annotations: ns.Annotations}, nil
}

// auditAnnotations put this pass's changes into the API server's audit log; the API server prefixes the
// keys with the webhook's name. Warn mode prefixes them with "would-": nothing was changed.
func auditAnnotations(d policy.Decision, prefix string) map[string]string {
	a := map[string]string{prefix + "changes": d.ChangesJSON()}
	if d.Build != "" {
		a[prefix+"build"] = d.Build
		a[prefix+"build-source"] = d.BuildSource
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
	return other
}
