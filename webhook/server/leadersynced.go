package server

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// leaderSynced sets g to 1 once this replica leads and the caches of its cluster-wide work have synced,
// and back to 0 when the term ends: what an operator (and the scale lab) watches to tell how long a new
// leader takes to act after a failover. It runs only while leading, and only then gets the informers of
// objs: one got at setup would be started with the manager's caches, before the Lease, on every replica.
func leaderSynced(c cache.Cache, objs []client.Object, synced []toolscache.InformerSynced, g prometheus.Gauge) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		defer g.Set(0)
		for _, obj := range objs {
			inf, err := c.GetInformer(ctx, obj)
			if err != nil {
				return fmt.Errorf("informer for %T: %w", obj, err)
			}
			synced = append(synced, inf.HasSynced)
		}
		if c.WaitForCacheSync(ctx) && toolscache.WaitForCacheSync(ctx.Done(), synced...) {
			g.Set(1)
		}
		<-ctx.Done()
		return nil
	})
}
