package audit

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kinds of finding about Services in front of Windows pods, one per setting, so that a cluster whose
// Windows nodes are known to handle one (DSR, say) can leave that kind out.
const (
	// ServiceLocalTraffic: externalTrafficPolicy Local, which Windows nodes honour only with DSR.
	ServiceLocalTraffic = "service-local-traffic-needs-dsr"
	// ServiceIPv6SingleStack: an IPv6 single-stack Service whose Windows pods have no IPv6 address, or
	// only IPv6 ones.
	ServiceIPv6SingleStack = "service-ipv6-single-stack"
	// ServiceAffinityTimeout: sessionAffinity ClientIP, whose timeout Windows does not keep.
	ServiceAffinityTimeout = "service-affinity-timeout-ignored"
	// ServiceTooManyBackends: more ready endpoints than a Windows node's load balancer supports.
	ServiceTooManyBackends = "service-over-64-backends"
)

const (
	// maxWindowsBackends: backend pods (unique destination addresses) one Service may have on Windows
	// nodes (seedNetworking, Container networking).
	maxWindowsBackends = 64
	// affinityBuild: the first Windows build with session affinity (seedNetworking, Load balancing and
	// Services).
	affinityBuild = 19551
	// seedNetworking is the seed whose networking sections the findings cite.
	seedNetworking = "windows-containers-in-kubernetes-docs-v1.24.txt"
)

// frontedService is a Service with a selector, and what the Windows pods it selects say.
type frontedService struct {
	namespace, name string
	selector        map[string]string
	localTraffic    bool
	ipv6Only        bool
	affinityTimeout *int32 // set: sessionAffinity ClientIP
	// windowsPods it selects; pod is the first by name.
	windowsPods int
	pod         string
	// noIPv6, onlyIPv6 count the Windows pods with addresses that have no IPv6 one, or only IPv6 ones.
	noIPv6, onlyIPv6 int
	// backends are its ready endpoints' addresses by family, counted only when it selects Windows pods.
	backends map[discoveryv1.AddressType]map[string]bool
}

// services matches each Windows pod against the Services of its namespace, and judges those that
// select Windows pods as kube-proxy on a Windows node (winkernel) serves them. A namespace's Services
// are read when its first Windows pod is, so a cluster or namespace without Windows pods costs no list.
// Pods are not kept: each Service is indexed under one pair of its selector, so a pod is compared only
// with the Services that pair of its labels names.
type services struct {
	pager *pager
	nodes *nodes
	out   *sink
	// read are the namespaces whose Services were listed (or refused).
	read map[string]bool
	// byPair indexes the Services by namespace and one key=value pair of their selector.
	byPair map[string][]*frontedService
	all    []*frontedService
}

func newServices(p *pager, nodes *nodes, out *sink) *services {
	return &services{pager: p, nodes: nodes, out: out, read: map[string]bool{}, byPair: map[string][]*frontedService{}}
}

func pairKey(ns, k, v string) string { return ns + "\x00" + k + "\x00" + v }

// readNamespace lists the Services of ns, keeping those that select pods.
func (s *services) readNamespace(ctx context.Context, ns string) {
	s.read[ns] = true
	err := s.pager.list(ctx, ns, func() client.ObjectList { return &corev1.ServiceList{} }, nil, func(l client.ObjectList) {
		items := l.(*corev1.ServiceList).Items
		for i := range items {
			s.add(&items[i])
		}
	})
	if err != nil {
		s.out.notRead(fmt.Sprintf("services in %s: %s; its Services in front of Windows pods were not judged", ns, reason(err)))
	}
}

func (s *services) add(svc *corev1.Service) {
	// An ExternalName Service's selector selects nothing; one without a selector has its endpoints
	// written by someone else, and no pods to judge it by.
	if svc.Spec.Type == corev1.ServiceTypeExternalName || len(svc.Spec.Selector) == 0 {
		return
	}
	f := &frontedService{namespace: svc.Namespace, name: svc.Name, selector: svc.Spec.Selector,
		localTraffic: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
		ipv6Only:     len(svc.Spec.IPFamilies) == 1 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol,
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		// The API server defaults it to 10800; a Service read from elsewhere may lack it.
		timeout := int32(corev1.DefaultClientIPServiceAffinitySeconds)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			timeout = *c.ClientIP.TimeoutSeconds
		}
		f.affinityTimeout = &timeout
	}
	first := sortedKeys(svc.Spec.Selector)[0]
	key := pairKey(svc.Namespace, first, svc.Spec.Selector[first])
	s.byPair[key] = append(s.byPair[key], f)
	s.all = append(s.all, f)
}

// pod counts a Windows pod towards the Services that select it, reading its namespace's Services first
// if they were not. A pod that has finished is no one's backend.
func (s *services) pod(ctx context.Context, p *corev1.Pod) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	if !s.read[p.Namespace] {
		s.readNamespace(ctx, p.Namespace)
	}
	for k, v := range p.Labels {
		for _, f := range s.byPair[pairKey(p.Namespace, k, v)] {
			if selects(f.selector, p.Labels) {
				f.add(p)
			}
		}
	}
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (f *frontedService) add(p *corev1.Pod) {
	if f.windowsPods == 0 || p.Name < f.pod {
		f.pod = p.Name
	}
	f.windowsPods++
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	var v4, v6 bool
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			v4, v6 = v4 || a.Unmap().Is4(), v6 || (a.Is6() && !a.Is4In6())
		}
	}
	switch {
	case !v4 && !v6: // no address yet: nothing to say
	case !v6:
		f.noIPv6++
	case !v4:
		f.onlyIPv6++
	}
}

// judge counts the backends of the Services that select Windows pods, from the EndpointSlices of their
// namespaces, and reports each setting a Windows node does not serve as asked.
func (s *services) judge(ctx context.Context) {
	fronted := map[string]map[string]*frontedService{}
	for _, f := range s.all {
		if f.windowsPods == 0 {
			continue
		}
		if fronted[f.namespace] == nil {
			fronted[f.namespace] = map[string]*frontedService{}
		}
		fronted[f.namespace][f.name] = f
	}
	for _, ns := range sortedKeys(fronted) {
		s.countBackends(ctx, ns, fronted[ns])
		for _, name := range sortedKeys(fronted[ns]) {
			s.report(fronted[ns][name])
		}
	}
}

// countBackends keeps the addresses of the ready endpoints of byName's Services: what kube-proxy on a
// Windows node puts into each Service's load balancer (winkernel syncProxyRules, v1.36), by family,
// each address once however many slices hold it.
func (s *services) countBackends(ctx context.Context, ns string, byName map[string]*frontedService) {
	err := s.pager.list(ctx, ns, func() client.ObjectList { return &discoveryv1.EndpointSliceList{} }, nil, func(l client.ObjectList) {
		items := l.(*discoveryv1.EndpointSliceList).Items
		for i := range items {
			es := &items[i]
			f := byName[es.Labels[discoveryv1.LabelServiceName]]
			if f == nil || (es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6) {
				continue
			}
			for _, ep := range es.Endpoints {
				if len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
					continue
				}
				if f.backends == nil {
					f.backends = map[discoveryv1.AddressType]map[string]bool{}
				}
				if f.backends[es.AddressType] == nil {
					f.backends[es.AddressType] = map[string]bool{}
				}
				// kube-proxy takes an endpoint's first address only.
				f.backends[es.AddressType][ep.Addresses[0]] = true
			}
		}
	})
	if err != nil {
		s.out.notRead(fmt.Sprintf("endpointslices in %s: %s; the backends of its Services in front of Windows pods were not counted", ns, reason(err)))
	}
}

func (s *services) report(f *frontedService) {
	obj := "Service/" + f.name
	picks := "its selector picks Windows pod " + f.pod
	if f.windowsPods > 1 {
		picks = fmt.Sprintf("its selector picks %d Windows pods (%s among them)", f.windowsPods, f.pod)
	}
	if f.localTraffic {
		s.out.finding(ServiceLocalTraffic, f.namespace, obj, "externalTrafficPolicy: Local, and "+picks+
			": Windows nodes keep traffic on the node and the client's IP only with Direct Server Return ("+seedNetworking+
			", Container networking, Load balancing and Services). kube-proxy on Windows (winkernel, v1.36) serves it with DSR load balancers when the node's HNS supports DSR, whatever its --enable-dsr,"+
			" and otherwise quietly as Cluster: traffic goes to pods on other nodes and the client's IP is lost. The audit cannot see the nodes' HNS:"+
			" check kube-proxy's log on the Windows nodes (at -v=3, localTrafficDSR for this Service), or use externalTrafficPolicy: Cluster if the client's IP does not matter")
	}
	if f.ipv6Only && (f.noIPv6 > 0 || f.onlyIPv6 > 0) {
		var what []string
		if f.noIPv6 > 0 {
			what = append(what, fmt.Sprintf("%s no IPv6 address, so the EndpointSlice controller leaves them out and the Service never reaches them", podsHave(f.noIPv6, f.windowsPods)))
		}
		if f.onlyIPv6 > 0 {
			what = append(what, fmt.Sprintf("%s only IPv6 addresses, and Kubernetes on Windows does not support IPv6-only networking", podsHave(f.onlyIPv6, f.windowsPods)))
		}
		s.out.finding(ServiceIPv6SingleStack, f.namespace, obj, "ipFamilies [IPv6] only, and "+picks+": "+strings.Join(what, "; ")+
			". Windows pods get IPv6 addresses only dual-stack, on l2bridge networks, not on overlay ("+seedNetworking+", IPv6 networking)."+
			" Give the Service ipFamilyPolicy: PreferDualStack on dual-stack Windows nodes, or serve the Windows pods over IPv4")
	}
	if f.affinityTimeout != nil {
		detail := fmt.Sprintf("sessionAffinity: ClientIP with timeoutSeconds %d (10800 unless set: the API server's default), and %s:"+
			" Windows does not support the timeout (%s, Session affinity). kube-proxy on Windows nodes (winkernel) asks the HNS to spread by source IP"+
			" and passes no timeout, so traffic through a Windows node (from its pods, or to its NodePort or load balancer) stays with one backend"+
			" for as long as the backends stay the same, not for %d seconds",
			*f.affinityTimeout, picks, seedNetworking, *f.affinityTimeout)
		if old := s.nodesWithoutAffinity(); len(old) > 0 {
			detail += fmt.Sprintf("; on Windows %s (builds before 10.0.%d: %s, Load balancing and Services) there is no session affinity at all, and kube-proxy logs that it is not supported", nodeList(old), affinityBuild, seedNetworking)
		}
		s.out.finding(ServiceAffinityTimeout, f.namespace, obj, detail+". Do not rely on the timeout on Windows")
	}
	family, most := discoveryv1.AddressTypeIPv4, 0
	for _, fam := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		if n := len(f.backends[fam]); n > most {
			family, most = fam, n
		}
	}
	if most > maxWindowsBackends {
		s.out.finding(ServiceTooManyBackends, f.namespace, obj, fmt.Sprintf("%d ready %s endpoints in its EndpointSlices, and %s:"+
			" a Service may have at most %d backends (unique destination addresses) on Windows nodes (%s, Container networking)."+
			" kube-proxy on every Windows node (winkernel) puts all of them, Linux pods' too, into one HNS load balancer per port and checks no limit."+
			" Keep at most %d ready pods behind one Service, or split them between Services",
			most, family, picks, maxWindowsBackends, seedNetworking, maxWindowsBackends))
	}
}

// podsHave says how many of the Windows pods a Service selects have something.
func podsHave(n, of int) string {
	switch {
	case of == 1:
		return "it has"
	case n == 1:
		return "1 of them has"
	}
	return strconv.Itoa(n) + " of them have"
}

// nodesWithoutAffinity are the Windows nodes whose build predates session affinity.
func (s *services) nodesWithoutAffinity() []string {
	var old []string
	for name, build := range s.nodes.build {
		parts := strings.Split(build, ".")
		if len(parts) < 3 {
			continue
		}
		if n, err := strconv.Atoi(parts[2]); err == nil && n < affinityBuild {
			old = append(old, name)
		}
	}
	return old
}
