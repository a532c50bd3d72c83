package policy

import "testing"

// TestPartialServiceNames holds the service name forms to what charts write, and to the names that must
// not be reported: full names, bare names, names that are not connected to, and names of other domains.
func TestPartialServiceNames(t *testing.T) {
	runHeuristicCases(t, []heuristicCase{
		{"connection forms in env, command and args", `
initContainers:
- name: wait
  command: ["sh", "-c", "until wget -qO- http://api.app.svc:8080/healthz; do sleep 1; done"]
containers:
- name: app
  env:
  - {name: REDIS_ADDR, value: "redis-master.cache.svc:6379"}
  - {name: DATABASE_URL, value: "postgres://app:s3cret@db.data.svc:5432/app?sslmode=disable"}
  - {name: JDBC, value: "jdbc:postgresql://db.data.svc.:5432/app"}
  - {name: ETCD, value: "dns:///etcd.db.svc:2379"}
  - {name: BROKERS, value: "kafka-0.kafka-headless.queue.svc:9092,kafka-1.kafka-headless.queue.svc:9092"}
  - {name: NS, value: "http://grafana.$(POD_NAMESPACE).svc:$(GRAFANA_PORT)/api"}
  - {name: NOPORT, value: "https://grafana.monitoring.svc"}
  args: ["--v=2", "--server=http://grafana.monitoring.SVC:3000", "--metrics=x.y.svc:9090/metrics"]
`, []string{
			`linuxCommands spec.initContainers[wait].command = ["sh","…"]`,
			`partialServiceNames spec.initContainers[wait].command[2] = "api.app.svc:8080"`,
			`partialServiceNames spec.containers[app].env[REDIS_ADDR].value = "redis-master.cache.svc:6379"`,
			`partialServiceNames spec.containers[app].env[DATABASE_URL].value = "db.data.svc:5432"`,
			`partialServiceNames spec.containers[app].env[JDBC].value = "db.data.svc.:5432"`,
			`partialServiceNames spec.containers[app].env[ETCD].value = "etcd.db.svc:2379"`,
			`partialServiceNames spec.containers[app].env[BROKERS].value = "kafka-0.kafka-headless.queue.svc:9092"`,
			`partialServiceNames spec.containers[app].env[NS].value = "grafana.$(POD_NAMESPACE).svc:$(GRAFANA_PORT)"`,
			`partialServiceNames spec.containers[app].env[NOPORT].value = "grafana.monitoring.svc"`,
			`partialServiceNames spec.containers[app].args[1] = "grafana.monitoring.SVC:3000"`,
			`partialServiceNames spec.containers[app].args[2] = "x.y.svc:9090"`,
		}},
		{"names that resolve, names that are not connected to, and names of other domains", `
containers:
- name: create
  args:
  - "--dynamic-serving-dns-names=cert-manager-webhook.$(POD_NAMESPACE).svc"
  - "--host=ingress-nginx-controller-admission,ingress-nginx-controller-admission.$(POD_NAMESPACE).svc"
  - "--argocd-repo-server=argo-cd-argocd-repo-server:8081"
  - "--full=http://grafana.monitoring.svc.cluster.local:3000"
  - "--ambiguous=http://grafana.monitoring:3000"
  - "--ambiguous2=grafana.monitoring:3000"
  - "default.svc:443"
  - "foo.svc.example.com:80"
  - "my_svc.ns.svc:80"
  - "x.ns.svc:99999999"
  - "x.ns.svc:http"
  - "-x.ns.svc:80"
  - "x..svc:80"
  - "ftp//x.ns.svc"
  - "1http://x.ns.svc:80"
  env:
  - {name: CSI_ENDPOINT, value: "unix:///csi/csi.sock"}
  - {name: CSI_WIN, value: "unix://C:\\\\csi\\\\csi.sock"}
  - {name: LISTEN, value: "0.0.0.0:9808"}
  - {name: HOST, value: "$(HOST_IP):9100"}
  - {name: FROM, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
`, nil},
	})
}

// TestServiceNameFormsTable holds the documented forms to what the matcher recognises.
func TestServiceNameFormsTable(t *testing.T) {
	for _, f := range serviceNameForms {
		if _, ok := findPartialServiceName(f.example); !ok {
			t.Errorf("the example of %q is not recognised: %s", f.form, f.example)
		}
	}
}
