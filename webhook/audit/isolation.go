package audit

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// hyperV finds the cluster's Hyper-V isolated RuntimeClasses (by handler, policy.HyperVGuest), read
// through the webhook's inventory once, when a pod names a RuntimeClass or --builds needs them.
type hyperV struct {
	cluster *clusterFacts
	classes map[string]policy.RuntimeClass
	read    bool
}

// all are the Hyper-V classes of the cluster, by name; nil when there are none or they could not be read.
func (h *hyperV) all(ctx context.Context) map[string]policy.RuntimeClass {
	if h.read {
		return h.classes
	}
	h.read = true
	c := h.cluster.get(ctx)
	if c == nil {
		return nil
	}
	for name, rc := range c.RuntimeClasses {
		if _, ok := policy.HyperVGuest(rc.Handler); ok {
			if h.classes == nil {
				h.classes = map[string]policy.RuntimeClass{}
			}
			h.classes[name] = rc
		}
	}
	return h.classes
}

// of is the Hyper-V class spec names, as a map of one for policy.HyperVBuilds; nil when it names none
// or a process-isolated one.
func (h *hyperV) of(ctx context.Context, spec *corev1.PodSpec) map[string]policy.RuntimeClass {
	if spec.RuntimeClassName == nil {
		return nil
	}
	name := *spec.RuntimeClassName
	if rc, ok := h.all(ctx)[name]; ok {
		return map[string]policy.RuntimeClass{name: rc}
	}
	return nil
}
