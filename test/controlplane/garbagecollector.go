package controlplane

import (
	"fmt"
	"strconv"
)

// startGarbageCollector runs bin/k8s/garbagecollector (test/cmd/garbagecollector: Kubernetes' own garbage
// collector controller, as kube-controller-manager runs it) against cp's API server, with its kubeconfig
// and log (garbagecollector.log) in work. It returns once the collector's informers have synced, so
// that an object whose owner is deleted from then on is deleted as a real cluster deletes it.
func startGarbageCollector(cp *ControlPlane, work string) (*component, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return startComponent(cp, work, "garbagecollector", func(kubeconfig string) []string {
		return []string{"--kubeconfig=" + kubeconfig, "--ready-address=127.0.0.1:" + strconv.Itoa(port)}
	}, fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
}
