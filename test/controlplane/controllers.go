package controlplane

import (
	"fmt"
	"strconv"
	"strings"
)

// startControllers runs bin/k8s/controllers (test/cmd/controllers: Kubernetes' own garbage collector and
// service account controllers, as kube-controller-manager runs them) against cp's API server, with its
// kubeconfig and log (controllers.log) in work, running the controllers o asks for. It returns once their
// informers have synced, so that from then on an object whose owner is deleted is deleted, and a new
// namespace gets its "default" ServiceAccount, as in a real cluster.
func startControllers(cp *ControlPlane, o Options, work string) (*component, error) {
	var names []string
	if o.GarbageCollector {
		names = append(names, "garbage-collector-controller")
	}
	if o.ServiceAccounts {
		names = append(names, "serviceaccount-controller")
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return startComponent(cp, work, "controllers", func(kubeconfig string) []string {
		return []string{"--kubeconfig=" + kubeconfig, "--ready-address=127.0.0.1:" + strconv.Itoa(port),
			"--controllers=" + strings.Join(names, ",")}
	}, fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
}
