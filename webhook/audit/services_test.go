package audit

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func service(ns, name string, selector map[string]string, tweak func(*corev1.ServiceSpec)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: selector, Type: corev1.ServiceTypeClusterIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
	if tweak != nil {
		tweak(&s.Spec)
	}
	return s
}

func labelled(p *corev1.Pod, ips []string, labels ...string) *corev1.Pod {
	p.Labels = map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		p.Labels[labels[i]] = labels[i+1]
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// slice is an EndpointSlice of service with ready endpoints at addresses from..to-1 of 10.1.0.0/16 and
// notReady more that are not ready.
func slice(name, service string, from, to, notReady int) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4}
	for i := from; i < to; i++ {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/256, i%256)}})
	}
	for i := range notReady {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.2.0.%d", i)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}})
	}
	return es
}

func serviceObjects() []client.Object {
	web := map[string]string{"app": "web"}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		node("win2019-0", b2019, true), node("win2022-0", b2022, true),
		labelled(winPod("web-1", img2022), []string{"10.0.0.2"}, "app", "web", "tier", "front"),
		labelled(winPod("web-0", img2022), []string{"10.0.0.1"}, "app", "web", "tier", "front"),
		labelled(winPod("v6", img2022), []string{"fd00::1"}, "app", "v6"),
		labelled(winPod("dual", img2022), []string{"10.0.0.9", "fd00::9"}, "app", "dual"),
		labelled(winPod("starting", img2022), nil, "app", "starting"),
		// Neither counts: a Linux pod, and a Windows pod that has finished.
		labelled(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "linux", Namespace: "web"}, Spec: linuxSpec()}, []string{"10.0.0.3"}, "app", "web"),
		func() *corev1.Pod {
			p := labelled(winPod("done", img2022), []string{"10.0.0.4"}, "app", "web")
			p.Status.Phase = corev1.PodFailed
			return p
		}(),
		service("web", "local", web, func(s *corev1.ServiceSpec) {
			s.Type, s.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
		}),
		service("web", "cluster", web, func(s *corev1.ServiceSpec) {
			s.Type, s.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyCluster
		}),
		service("web", "sticky", map[string]string{"app": "web", "tier": "front"}, func(s *corev1.ServiceSpec) {
			s.SessionAffinity = corev1.ServiceAffinityClientIP
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(600))}}
		}),
		service("web", "v6-web", web, func(s *corev1.ServiceSpec) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
		service("web", "v6-only", map[string]string{"app": "v6"}, func(s *corev1.ServiceSpec) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
		service("web", "v6-dual", map[string]string{"app": "dual"}, func(s *corev1.ServiceSpec) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
		service("web", "v6-starting", map[string]string{"app": "starting"}, func(s *corev1.ServiceSpec) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
		// 75 distinct ready addresses (5 in both slices, 10 more not ready); 64 is allowed.
		service("web", "big", map[string]string{"tier": "front"}, nil),
		slice("big-a", "big", 0, 40, 10), slice("big-b", "big", 35, 75, 0),
		service("web", "at-limit", web, nil), slice("at-limit-a", "at-limit", 0, 64, 3),
		// None of these selects a Windows pod.
		service("web", "api", map[string]string{"app": "api"}, func(s *corev1.ServiceSpec) {
			s.Type, s.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
		}),
		service("web", "manual", nil, func(s *corev1.ServiceSpec) {
			s.Type, s.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
		}),
		service("web", "external", web, func(s *corev1.ServiceSpec) {
			s.Type, s.ExternalName, s.SessionAffinity = corev1.ServiceTypeExternalName, "example.com", corev1.ServiceAffinityClientIP
		}),
		service("other", "local", web, func(s *corev1.ServiceSpec) {
			s.Type, s.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
		}),
		slice("manual-a", "manual", 0, 100, 0),
	}
}

var serviceKinds = []string{ServiceLocalTraffic, ServiceIPv6SingleStack, ServiceAffinityTimeout, ServiceTooManyBackends}

// TestServicesInFrontOfWindowsPods: Services are matched against the Windows pods of their namespace,
// and each setting a Windows node does not serve as asked is its own finding.
func TestServicesInFrontOfWindowsPods(t *testing.T) {
	rep := run(t, Options{}, serviceObjects()...)
	checkFindings(t, "local traffic", rep, ServiceLocalTraffic, []storageFinding{
		{"Service/local", "externalTrafficPolicy: Local, and its selector picks 2 Windows pods (web-0 among them): Windows nodes keep traffic on the node and the client's IP only with Direct Server Return"},
	})
	checkFindings(t, "IPv6", rep, ServiceIPv6SingleStack, []storageFinding{
		{"Service/v6-only", "ipFamilies [IPv6] only, and its selector picks Windows pod v6: it has only IPv6 addresses, and Kubernetes on Windows does not support IPv6-only networking"},
		{"Service/v6-web", "ipFamilies [IPv6] only, and its selector picks 2 Windows pods (web-0 among them): 2 of them have no IPv6 address, so the EndpointSlice controller leaves them out"},
	})
	checkFindings(t, "affinity", rep, ServiceAffinityTimeout, []storageFinding{
		{"Service/sticky", "sessionAffinity: ClientIP with timeoutSeconds 600 (10800 unless set: the API server's default), and its selector picks 2 Windows pods (web-0 among them): Windows does not support the timeout"},
	})
	checkFindings(t, "affinity on 2019", rep, ServiceAffinityTimeout, []storageFinding{
		{"Service/sticky", "on Windows node win2019-0 (builds before 10.0.19551: windows-containers-in-kubernetes-docs-v1.24.txt, Load balancing and Services) there is no session affinity at all"},
	})
	checkFindings(t, "backends", rep, ServiceTooManyBackends, []storageFinding{
		{"Service/big", "75 ready IPv4 endpoints in its EndpointSlices, and its selector picks 2 Windows pods (web-0 among them): a Service may have at most 64 backends"},
	})
	for _, f := range rep.Findings {
		if f.Namespace == "other" {
			t.Errorf("a Service of another namespace matched: %+v", f)
		}
	}
	if len(rep.Incomplete) > 0 {
		t.Errorf("incomplete: %q", rep.Incomplete)
	}

	forbid := func(deny client.ObjectList) *Report { return runForbidding(t, serviceObjects(), deny) }
	// Without EndpointSlices the backends are not counted; the rest stands.
	rep = forbid(&discoveryv1.EndpointSliceList{})
	if got := findings(rep, serviceKinds...); len(got) != 4 || len(findings(rep, ServiceTooManyBackends)) != 0 {
		t.Errorf("EndpointSlices forbidden: %q", got)
	}
	if len(rep.Incomplete) != 1 || !strings.HasPrefix(rep.Incomplete[0], "endpointslices in web: forbidden") {
		t.Errorf("EndpointSlices forbidden: incomplete %q", rep.Incomplete)
	}
	// Without Services nothing is said of them, and the pods are still audited.
	rep = forbid(&corev1.ServiceList{})
	if got := findings(rep, serviceKinds...); len(got) != 0 || len(findings(rep, NotCovered)) == 0 {
		t.Errorf("Services forbidden: %q, and %d not-covered", got, len(findings(rep, NotCovered)))
	}
	if len(rep.Incomplete) != 1 || !strings.HasPrefix(rep.Incomplete[0], "services in web: forbidden") {
		t.Errorf("Services forbidden: incomplete %q", rep.Incomplete)
	}
}

// TestServicesListedWhereWindowsPodsAre: Services are listed once in each namespace with Windows pods,
// and nowhere else; the selector of -l (which picks pods and workloads) does not filter them.
func TestServicesListedWhereWindowsPodsAre(t *testing.T) {
	var scopes []string
	objs := append(serviceObjects(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "linux-only"}},
		labelled(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "linux", Namespace: "linux-only"}, Spec: linuxSpec()}, nil, "tier", "front"))
	c := fake.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.ServiceList); ok {
				o := &client.ListOptions{}
				o.ApplyOptions(opts)
				scopes = append(scopes, o.Namespace)
				if o.LabelSelector != nil && !o.LabelSelector.Empty() {
					t.Errorf("Services listed with selector %s", o.LabelSelector)
				}
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	rep, err := Run(context.Background(), c, Options{PageSize: 1, Selector: labels.SelectorFromSet(labels.Set{"tier": "front"})})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(scopes, []string{"web"}) || len(findings(rep, ServiceLocalTraffic)) != 1 {
		t.Errorf("listed Services in %q; findings %q", scopes, findings(rep, serviceKinds...))
	}
}

// TestClusterSideKindsRendered: the new kinds reach every output: the table, CSV of the findings view
// and JSON.
func TestClusterSideKindsRendered(t *testing.T) {
	var table, csvOut, js bytes.Buffer
	for _, objs := range [][]client.Object{serviceObjects(), storageObjects()} {
		rep := run(t, Options{}, objs...)
		if err := rep.WriteTable(&table, ViewFindings); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteCSV(&csvOut, ViewFindings); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range append(slices.Clone(serviceKinds), VolumeNotMountable) {
		for name, out := range map[string]string{"table": table.String(), "CSV": csvOut.String(), "JSON": js.String()} {
			if !strings.Contains(out, kind) {
				t.Errorf("%s lacks %s", name, kind)
			}
		}
	}
}
