package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/scheduling/gated"
)

var sharedGatedMetrics = sync.OnceValue(func() *gated.Metrics { return gated.NewMetrics(metrics.Registry) })

// gatedLookupWait bounds one read of a gated pod's images by the leader: the resolver's background
// timeout (registry.Config.BackgroundTimeout, which the server leaves at its default), past which no
// lookup it started can still answer.
const gatedLookupWait = 10 * time.Second

// newGatedController is the leader's controller of gated pods, reading what admission reads: the
// policy in force, the namespaces' cache (the API server for one not seen yet), the inventory's
// cluster and the server's resolver (nil for none).
func newGatedController(m ctrl.Manager, shared webhook.Config, current *atomic.Pointer[policy.Policy], bound time.Duration, log logr.Logger) *gated.Controller {
	return &gated.Controller{
		Live: m.GetAPIReader(), Writer: m.GetClient(), Namespaces: shared.Namespaces, Images: shared.Images, Cluster: shared.Cluster,
		Policy: current.Load, Version: shared.Version, Bound: bound, Wait: gatedLookupWait,
		Recorder: m.GetEventRecorder("wincompat"), Metrics: sharedGatedMetrics(), Log: log,
	}
}
