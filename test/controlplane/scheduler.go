package controlplane

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// startScheduler runs bin/k8s/kube-scheduler against cp's API server, with its kubeconfig, certificates
// and log (kube-scheduler.log) in work. It returns once the scheduler reports ready (its informers have
// synced), so that placement tests time only scheduling.
func startScheduler(cp *ControlPlane, work string) (*component, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return startComponent(cp, work, "kube-scheduler", func(kubeconfig string) []string {
		return []string{
			"--kubeconfig=" + kubeconfig,
			"--leader-elect=false", // one scheduler, and no Lease to wait for
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(work, "certs"), // its self-signed serving certificate
			// The default client QPS (50) makes binding 400 pods, each with an Event, take seconds for no
			// benefit to the test; a real cluster's scheduler would be tuned the same way at this churn.
			"--kube-api-qps=500", "--kube-api-burst=1000",
		}
	}, fmt.Sprintf("https://127.0.0.1:%d/readyz", port)) // ready includes the informers' sync
}
