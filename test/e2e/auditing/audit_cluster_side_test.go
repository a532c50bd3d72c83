package auditing

// Issue 26: the cluster side of Windows pods, which the webhook never sees, against the real
// kube-apiserver: claims bound to volumes no Windows node can mount (an in-tree NFS volume, a CSI driver
// whose CSINode entries are on the Linux node only), and Services in front of Windows pods with the
// settings Windows nodes do not serve as asked. No scheduler or controller runs: the objects are
// created as they would stand (pods bound by nodeName, EndpointSlices written out), which is what the
// audit reads. The API server's own defaulting is exercised (sessionAffinity's timeout) and its paging
// (page size 2). A user without list on csinodes and endpointslices gets a report that names them.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/test/controlplane"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/audit"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

const nsClusterSide = "cluster-side"

func TestAuditClusterSide(t *testing.T) {
	// Dual-stack Service ranges, so that an IPv6 single-stack Service can be created at all.
	cp := controlplane.LaunchBare(t, controlplane.WithAPIServerFlag("service-cluster-ip-range", "10.0.0.0/24,fd00:10::/108"))
	c := cp.Client
	ctx := context.Background()
	seedClusterSide(ctx, t, c)

	kinds := []string{audit.VolumeNotMountable, audit.ServiceLocalTraffic, audit.ServiceIPv6SingleStack, audit.ServiceAffinityTimeout, audit.ServiceTooManyBackends}
	want := []string{
		// The defaulted timeout is the API server's: the Service was created without one.
		audit.ServiceAffinityTimeout + " Service/web-sticky: sessionAffinity: ClientIP with timeoutSeconds 10800 ",
		audit.ServiceIPv6SingleStack + " Service/web-v6: ipFamilies [IPv6] only, and its selector picks 2 Windows pods (web-0 among them): 2 of them have no IPv6 address",
		audit.ServiceLocalTraffic + " Service/web-lb: externalTrafficPolicy: Local, and its selector picks 2 Windows pods (web-0 among them)",
		audit.ServiceTooManyBackends + " Service/web-big: 70 ready IPv4 endpoints in its EndpointSlices",
		audit.VolumeNotMountable + " Pod/disk: PersistentVolumeClaim data-disk is bound to PersistentVolume cluster-side-disk (CSI driver disk.csi.azure.com): driver disk.csi.azure.com is not registered on node win-1, where its pods run",
		audit.VolumeNotMountable + " Pod/nfs: PersistentVolumeClaim data-nfs is bound to PersistentVolume cluster-side-nfs (nfs): kubelet's Windows mounter mounts only SMB shares",
		audit.VolumeNotMountable + " Pod/pending: PersistentVolumeClaim pending is not bound yet; its StorageClass cluster-side-nfs-csi provisions volumes (CSI driver nfs.csi.k8s.io): driver nfs.csi.k8s.io is registered on no Windows node",
	}
	check := func(t *testing.T, c client.Client, want []string) *audit.Report {
		t.Helper()
		rep, err := audit.Run(ctx, c, audit.Options{PageSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range rep.Findings {
			if slices.Contains(kinds, f.Kind) {
				got = append(got, f.Kind+" "+f.Object+": "+f.Detail)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d findings, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
			return rep
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("finding %d:\n got %s\nwant %s...", i, got[i], want[i])
			}
		}
		return rep
	}

	t.Run("administrator", func(t *testing.T) {
		if rep := check(t, c, want); len(rep.Incomplete) > 0 {
			t.Errorf("incomplete: %q", rep.Incomplete)
		}
	})

	// Without list on csinodes and endpointslices: the CSI drivers are not checked and the backends not
	// counted, both named under INCOMPLETE; everything else stands.
	t.Run("without csinodes and endpointslices", func(t *testing.T) {
		const user = "cluster-side-auditor"
		grantClusterSideAuditor(ctx, t, c, user)
		kc, err := cp.KubeConfig(user)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		if err != nil {
			t.Fatal(err)
		}
		uc, err := client.New(cfg, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rep := check(t, uc, slices.DeleteFunc(slices.Clone(want), func(w string) bool {
			return strings.HasPrefix(w, audit.ServiceTooManyBackends) || strings.Contains(w, "CSI driver")
		}))
		if len(rep.Incomplete) != 2 || !strings.HasPrefix(rep.Incomplete[0], "csinodes: forbidden") ||
			!strings.HasPrefix(rep.Incomplete[1], "endpointslices in "+nsClusterSide+": forbidden") {
			t.Errorf("incomplete: %q", rep.Incomplete)
		}
	})
}

func seedClusterSide(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	e2eutil.SetUpNamespace(ctx, t, c, nsClusterSide, nil, nil)
	for _, n := range []fixtures.Node{{Name: "win-0", OS: "windows", Build: e2eutil.Build2022}, {Name: "win-1", OS: "windows", Build: e2eutil.Build2022}, {Name: "linux-0", OS: "linux"}} {
		if err := fixtures.AddNode(ctx, c, n, 10); err != nil {
			t.Fatal(err)
		}
	}
	// The drivers whose node plugins registered with each kubelet: NFS and Azure Disk only on Linux.
	for node, drivers := range map[string][]string{
		"win-0":   {"smb.csi.k8s.io", "disk.csi.azure.com"},
		"win-1":   {"smb.csi.k8s.io"},
		"linux-0": {"nfs.csi.k8s.io", "disk.csi.azure.com"},
	} {
		cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node}}
		for _, d := range drivers {
			cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: node})
		}
		e2eutil.Create(ctx, t, c, cn)
	}
	e2eutil.Create(ctx, t, c, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "cluster-side-nfs-csi"}, Provisioner: "nfs.csi.k8s.io"})

	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	volume := func(name string, src corev1.PersistentVolumeSource) {
		e2eutil.Create(ctx, t, c, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			Capacity: size, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, PersistentVolumeSource: src}})
	}
	volume("cluster-side-nfs", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/exports"}})
	volume("cluster-side-disk", corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "disk.csi.azure.com", VolumeHandle: "disk-1"}})
	volume("cluster-side-smb", corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "smb.csi.k8s.io", VolumeHandle: "share-1"}})
	claim := func(name, volume, class string) {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsClusterSide}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeName: volume,
			Resources: corev1.VolumeResourceRequirements{Requests: size}}}
		if class != "" {
			pvc.Spec.StorageClassName = &class
		}
		e2eutil.Create(ctx, t, c, pvc)
	}
	claim("data-nfs", "cluster-side-nfs", "")
	claim("data-disk", "cluster-side-disk", "")
	claim("data-smb", "cluster-side-smb", "")
	claim("pending", "", "cluster-side-nfs-csi")

	pod := func(name, node string, labels map[string]string, claims ...string) *corev1.Pod {
		p := plainWindowsPod(nsClusterSide, name, e2eutil.Images2022[0])
		p.Labels, p.Spec.NodeName = labels, node
		for _, cl := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: cl, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: cl}}})
		}
		e2eutil.Create(ctx, t, c, p)
		return p
	}
	pod("nfs", "win-0", nil, "data-nfs")
	pod("disk", "win-1", nil, "data-disk")
	pod("smb", "win-1", nil, "data-smb")
	pod("pending", "", nil, "pending")
	web := map[string]string{"app": "web"}
	for i, node := range []string{"win-0", "win-1"} {
		p := pod(fmt.Sprintf("web-%d", i), node, web)
		ip := fmt.Sprintf("10.244.0.%d", i+1)
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	svc := func(name string, tweak func(*corev1.ServiceSpec)) {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsClusterSide}, Spec: corev1.ServiceSpec{
			Selector: web, Ports: []corev1.ServicePort{{Port: 80}}}}
		if tweak != nil {
			tweak(&s.Spec)
		}
		e2eutil.Create(ctx, t, c, s)
	}
	svc("web", nil)
	svc("web-lb", func(s *corev1.ServiceSpec) {
		s.Type, s.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
	})
	svc("web-sticky", func(s *corev1.ServiceSpec) { s.SessionAffinity = corev1.ServiceAffinityClientIP })
	svc("web-v6", func(s *corev1.ServiceSpec) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} })
	svc("web-big", nil)
	// 70 ready endpoints over two slices, as the EndpointSlice controller writes at most 100 per slice
	// but may split them; the 5 not ready do not count.
	for i, r := range [][3]int{{0, 40, 5}, {40, 70, 0}} {
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-big-%d", i), Namespace: nsClusterSide,
			Labels: map[string]string{discoveryv1.LabelServiceName: "web-big"}}, AddressType: discoveryv1.AddressTypeIPv4}
		for j := r[0]; j < r[1]; j++ {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.1.%d", j)}})
		}
		notReady := false
		for j := range r[2] {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.2.%d", j)},
				Conditions: discoveryv1.EndpointConditions{Ready: &notReady}})
		}
		e2eutil.Create(ctx, t, c, es)
	}
}

// grantClusterSideAuditor lets user list what the audit reads, csinodes and endpointslices aside, and
// waits until the authorizer says so.
func grantClusterSideAuditor(ctx context.Context, t *testing.T, c client.Client, user string) {
	t.Helper()
	rules := append(slices.Clone(workloadRules),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "services", "persistentvolumeclaims", "persistentvolumes"}, Verbs: []string{"list"}},
		rbacv1.PolicyRule{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"list"}})
	e2eutil.Create(ctx, t, c, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules})
	e2eutil.Create(ctx, t, c, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	waitForAccess(t, &e2eutil.Cluster{C: c}, user, "", "persistentvolumes", true)
}
