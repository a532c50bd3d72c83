package policy

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Injector is a mutating webhook that adds Linux-only containers to the pods it sees, and the per-pod
// switch it documents to leave a pod alone.
type Injector struct {
	Name string
	// Key is set to Value on the pod's labels (Label) or annotations: the form the injector reads.
	Key   string
	Value string
	Label bool
	// Why its containers cannot run on Windows, and where the key and value are defined.
	Why    string
	Source string
}

// linuxOnlyInjectors are the injectors that inject by default (in a namespace or cluster they are
// enabled for) and whose containers have no Windows build. Opt-in injectors (Dapr, Vault agent) need no
// opt-out: they act only on pods that ask. A Windows pod or template gets each opt-out the user did not
// set either way.
var linuxOnlyInjectors = []Injector{
	{Name: "istio", Key: "sidecar.istio.io/inject", Value: "false", Label: true,
		Why:    "istio-proxy and the iptables istio-init have no Windows build (istio/istio#27893); the label is read first and the annotation is deprecated",
		Source: "istio/api label/labels.yaml; istio/istio pkg/kube/inject/inject.go injectRequired"},
	{Name: "linkerd", Key: "linkerd.io/inject", Value: "disabled",
		Why:    "the proxy does not run on Windows nodes, yet injection still happens (linkerd/linkerd2#2882)",
		Source: "linkerd/linkerd2 pkg/k8s/labels.go ProxyInjectAnnotation, ProxyInjectDisabled"},
	{Name: "kuma", Key: "kuma.io/sidecar-injection", Value: "disabled", Label: true,
		Why:    "kuma-dp and kuma-init (iptables) are built for Linux and macOS only",
		Source: "kumahq/kuma pkg/plugins/runtime/k8s/metadata/annotations.go; webhooks/injector/precheck.go needToInject"},
	{Name: "appmesh", Key: "appmesh.k8s.aws/sidecarInjectorWebhook", Value: "disabled",
		Why:    "the Envoy sidecar and the iptables proxy-route-manager init container are Linux images; without a matching VirtualNode the pod would be refused",
		Source: "aws/aws-app-mesh-controller-for-k8s pkg/inject/constants.go, inject.go determineSidecarInjectMode"},
	{Name: "osm", Key: "openservicemesh.io/sidecar-injection", Value: "disabled",
		Why:    "Open Service Mesh picks its Windows sidecar only from a kubernetes.io/os nodeSelector; pods that reach Windows otherwise get the Linux images",
		Source: "openservicemesh/osm pkg/constants/constants.go; pkg/injector/patch.go"},
	{Name: "consul", Key: "consul.hashicorp.com/connect-inject", Value: "false",
		Why:    "consul-dataplane injection has no Windows path in consul-k8s (connectInject.default: true injects every pod)",
		Source: "hashicorp/consul-k8s control-plane/connect-inject/constants/annotations_and_labels.go; webhook/mesh_webhook.go shouldInject"},
	{Name: "datadog", Key: "admission.datadoghq.com/enabled", Value: "false", Label: true,
		Why:    "APM library injection adds Linux init containers; the label also turns off Datadog's environment and tag injection for the pod",
		Source: "DataDog/datadog-agent pkg/clusteragent/admission/common/const.go EnabledLabelKey; mutate/common/filter.go"},
	{Name: "dynatrace", Key: "dynatrace.com/inject", Value: "false",
		Why:    "the OneAgent init container is the operator image, built for Linux platforms only",
		Source: "Dynatrace/dynatrace-operator pkg/webhook/mutation/pod/mutator/config.go; webhook.go mutationRequired"},
	{Name: "instana", Key: "instana-autotrace", Value: "false", Label: true,
		Why:    "AutoTrace supports linux/amd64 nodes only",
		Source: "instana/instana-autotrace-webhook README; IBM Instana docs, AutoTrace webhook"},
}

// Injectors lists the Linux-only injectors wincompat knows, for docs and `wincompat policy`.
func Injectors() []Injector { return slices.Clone(linuxOnlyInjectors) }

func injectorNamed(name string) (Injector, bool) {
	i := slices.IndexFunc(linuxOnlyInjectors, func(in Injector) bool { return in.Name == name })
	if i < 0 {
		return Injector{}, false
	}
	return linuxOnlyInjectors[i], true
}

// optOutOfInjectors gives a Windows pod or template the opt-out of each injector the policy names,
// unless the object already says something under that key (as a label or an annotation: the user's
// word, even "true", stands). The opt-outs are recorded as one change per form, labels and annotations,
// so that a pod carries two warnings rather than one per injector. Each names its injectors in the
// table's order, whatever the policy's, so that the record derives the reason from what was set.
func (p *Policy) optOutOfInjectors(meta *metav1.ObjectMeta, rec *recorder) {
	labels, annotations := map[string]string{}, map[string]string{}
	var labelled, annotated []string
	for _, in := range linuxOnlyInjectors {
		if !slices.Contains(p.InjectorOptOuts, in.Name) {
			continue
		}
		if _, set := meta.Labels[in.Key]; set {
			continue
		}
		if _, set := meta.Annotations[in.Key]; set {
			continue
		}
		if in.Label {
			labels[in.Key] = in.Value
			labelled = append(labelled, in.Name)
		} else {
			annotations[in.Key] = in.Value
			annotated = append(annotated, in.Name)
		}
	}
	if len(labels) > 0 {
		if meta.Labels == nil {
			meta.Labels = map[string]string{}
		}
		maps.Copy(meta.Labels, labels)
		rec.add(Change{Action: Inject, Path: "metadata.labels", To: jsonValue(labels), Reason: InjectorOptOutReason(labelled), Rule: RuleInjectorOptOuts})
	}
	if len(annotations) > 0 {
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		maps.Copy(meta.Annotations, annotations)
		rec.add(Change{Action: Inject, Path: "metadata.annotations", To: jsonValue(annotations), Reason: InjectorOptOutReason(annotated), Rule: RuleInjectorOptOuts})
	}
}

// InjectorOptOutReason is the reason recorded for the opt-outs of the injectors named, in the policy's
// order.
func InjectorOptOutReason(names []string) string {
	return "opts out of Linux-only sidecar injectors (" + strings.Join(names, ", ") + ")"
}

// injectorOptOutReasonOf is InjectorOptOutReason of the injectors whose keys an opt-out change set (its
// To, a map of key to value), in the injector table's order; "" when a key is no injector's.
func injectorOptOutReasonOf(to json.RawMessage) string {
	set, ok := optOutsSet(to)
	if !ok {
		return ""
	}
	return InjectorOptOutReason(set.names())
}

// injectorSet is a set of the injector table's rows, bit i for row i (TestInjectorSetHoldsTheTable
// keeps the table within its 64 bits).
type injectorSet uint64

func (s injectorSet) names() []string {
	var names []string
	for i, in := range linuxOnlyInjectors {
		if s&(1<<i) != 0 {
			names = append(names, in.Name)
		}
	}
	return names
}

// optOutMembers are each injector's opt-out as a member of a JSON object, `"key":"value"`; byKey the
// rows in the order of their keys, as encoding/json writes a map.
var optOutMembers, optOutsByKey = func() ([][]byte, []int) {
	members := make([][]byte, len(linuxOnlyInjectors))
	byKey := make([]int, len(linuxOnlyInjectors))
	for i, in := range linuxOnlyInjectors {
		members[i] = []byte(string(jsonValue(in.Key)) + ":" + string(jsonValue(in.Value)))
		byKey[i] = i
	}
	slices.SortFunc(byKey, func(a, b int) int { return strings.Compare(linuxOnlyInjectors[a].Key, linuxOnlyInjectors[b].Key) })
	return members, byKey
}()

// appendOptOuts appends the opt-outs of set as jsonValue renders the map of their keys and values.
func appendOptOuts(dst []byte, set injectorSet) []byte {
	dst = append(dst, '{')
	first := true
	for _, i := range optOutsByKey {
		if set&(1<<i) == 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, optOutMembers[i]...)
	}
	return append(dst, '}')
}

// optOutsSet is the set of injectors whose opt-outs to (an opt-out change's To) holds, when it holds
// exactly those, written as appendOptOuts writes them. It allocates nothing: it runs for every record
// written.
func optOutsSet(to json.RawMessage) (injectorSet, bool) {
	var set injectorSet
	rest, ok := cutPrefix(to, "{")
	if !ok {
		return 0, false
	}
	for _, i := range optOutsByKey {
		next := rest
		if set != 0 {
			if next, ok = cutPrefix(next, ","); !ok {
				continue
			}
		}
		if bytes.HasPrefix(next, optOutMembers[i]) {
			set |= 1 << i
			rest = next[len(optOutMembers[i]):]
		}
	}
	return set, set != 0 && string(rest) == "}"
}

// cutPrefix is bytes.CutPrefix for a string prefix, without converting it.
func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}

// optOutReasonIs says whether reason is InjectorOptOutReason of set's names, without building it.
func optOutReasonIs(reason string, set injectorSet) bool {
	rest, ok := strings.CutPrefix(reason, optOutReasonBefore)
	if !ok {
		return false
	}
	sep := ""
	for i, in := range linuxOnlyInjectors {
		if set&(1<<i) == 0 {
			continue
		}
		if rest, ok = strings.CutPrefix(rest, sep); !ok {
			return false
		}
		if rest, ok = strings.CutPrefix(rest, in.Name); !ok {
			return false
		}
		sep = ", "
	}
	return rest == optOutReasonAfter
}

// optOutReasonBefore and optOutReasonAfter are what InjectorOptOutReason writes around the names.
var optOutReasonBefore, optOutReasonAfter, _ = strings.Cut(InjectorOptOutReason([]string{"\x00"}), "\x00")

// optOutsNamed is the set of the named injectors; false when a name is none of the table's.
func optOutsNamed(names []byte) (injectorSet, bool) {
	var set injectorSet
	ok := elements(names, func(e []byte) bool {
		name, isString := entryString(e)
		i := slices.IndexFunc(linuxOnlyInjectors, func(in Injector) bool { return in.Name == name })
		if !isString || i < 0 {
			return false
		}
		set |= 1 << i
		return true
	})
	return set, ok && set != 0
}
