package audit

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/inventory"
)

// clusterFacts are the cluster's builds, Windows node taints and RuntimeClasses as the webhook's
// inventory reads them, read once per run and only when warn mode or a RuntimeClass outside the catalog
// needs them.
type clusterFacts struct {
	reader  client.Reader
	read    bool
	cluster *policy.Cluster
	err     error
}

// get returns the facts, nil when they cannot be read (why says why); each caller notes what it did
// without them.
func (f *clusterFacts) get(ctx context.Context) *policy.Cluster {
	if !f.read {
		f.read = true
		f.cluster, f.err = inventory.ClusterOf(ctx, f.reader)
	}
	return f.cluster
}

func (f *clusterFacts) why() string { return reason(f.err) }
