package audit

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	csitrans "k8s.io/csi-translation-lib"
)

// VolumeNotMountable: a Windows pod's PersistentVolumeClaim whose volume a Windows node cannot mount:
// the pod stays in ContainerCreating.
const VolumeNotMountable = "volume-not-mountable-on-windows"

// inTreeSource is one in-tree source of a PersistentVolume that no Windows node can mount, and why.
type inTreeSource struct {
	field string // the PersistentVolumeSource field, as written in YAML
	in    func(*corev1.PersistentVolumeSource) bool
	why   string
	fix   string
}

const (
	// seedStorage is the seeds' section that lists what Windows nodes mount, and what not.
	seedStorage = "windows-containers-in-kubernetes-docs-v1.24.txt, Persistent storage"
	// removedPlugin: kubelet v1.36 registers no plugin for these (cmd/kubelet/app/plugins.go), on any node.
	removedPlugin = "kubelet v1.36 has no plugin for it on any node (removed from Kubernetes), and it was never among the plugins for Windows (" + seedStorage + ")"
	toCSI         = "move the data to storage whose CSI driver has a Windows node plugin"
)

// unmountableSources are the in-tree sources no Windows node mounts. The other fields of
// PersistentVolumeSource are judged elsewhere: csi by its driver, the sources CSI migration serves
// (awsElasticBlockStore, azureDisk, ...) by the driver csi-translation-lib names, and hostPath, local
// and flexVolume not at all (what they mount is on the node). TestInTreeSourcesCoverPersistentVolumeSource
// keeps the list whole as the API grows.
var unmountableSources = []inTreeSource{
	{"nfs", func(s *corev1.PersistentVolumeSource) bool { return s.NFS != nil },
		"kubelet's Windows mounter mounts only SMB shares (k8s.io/mount-utils mount_windows.go); NFS is unsupported on Windows nodes (" + seedStorage + ")",
		"serve the data over SMB (the SMB CSI driver smb.csi.k8s.io has a Windows node plugin)"},
	{"iscsi", func(s *corev1.PersistentVolumeSource) bool { return s.ISCSI != nil },
		"the in-tree iSCSI plugin runs iscsiadm and reads /dev/disk/by-path, which Windows nodes lack; Windows mounts iSCSI through a FlexVolume plugin (" + seedStorage + ", FlexVolume plugins)",
		"use the iSCSI FlexVolume plugin for Windows, or a CSI driver with a Windows node plugin"},
	{"fc", func(s *corev1.PersistentVolumeSource) bool { return s.FC != nil },
		"the in-tree Fibre Channel plugin scans /sys and /dev/disk, which Windows nodes lack; it is not among the in-tree plugins for Windows (" + seedStorage + ", In-tree volume plugins)",
		toCSI},
	{"cephfs", func(s *corev1.PersistentVolumeSource) bool { return s.CephFS != nil }, removedPlugin, toCSI},
	{"rbd", func(s *corev1.PersistentVolumeSource) bool { return s.RBD != nil }, removedPlugin, toCSI},
	{"glusterfs", func(s *corev1.PersistentVolumeSource) bool { return s.Glusterfs != nil }, removedPlugin, toCSI},
	{"quobyte", func(s *corev1.PersistentVolumeSource) bool { return s.Quobyte != nil }, removedPlugin, toCSI},
	{"storageos", func(s *corev1.PersistentVolumeSource) bool { return s.StorageOS != nil }, removedPlugin, toCSI},
	{"scaleIO", func(s *corev1.PersistentVolumeSource) bool { return s.ScaleIO != nil }, removedPlugin, toCSI},
	{"flocker", func(s *corev1.PersistentVolumeSource) bool { return s.Flocker != nil }, removedPlugin, toCSI},
	{"photonPersistentDisk", func(s *corev1.PersistentVolumeSource) bool { return s.PhotonPersistentDisk != nil }, removedPlugin, toCSI},
}

// notJudgedSources are the fields of PersistentVolumeSource the audit says nothing of: what they mount
// is on the node (hostPath, local) or in a plugin installed there (flexVolume).
var notJudgedSources = []string{"hostPath", "local", "flexVolume"}

// claimUse is what the Windows pods using one PersistentVolumeClaim say of it.
type claimUse struct {
	pod   string            // the first by name, to name in the finding
	pods  int               // Windows pods using it
	nodes map[string]string // the nodes they are bound to, and the first pod by name on each
	// last is the pod counted last: a pod that names the claim in two volumes counts once.
	last string
}

// claimVolume is what a claim refers to: its volume once bound, else its StorageClass.
type claimVolume struct {
	volume, class string
}

// volumeVerdict is what a PersistentVolume needs of a Windows node: nothing it can give (why), or a CSI
// driver registered there.
type volumeVerdict struct {
	what   string // "nfs", "CSI driver smb.csi.k8s.io", "kubernetes.io/aws-ebs, mounted by CSI driver ..."
	why    string // set: no Windows node can mount it
	fix    string
	driver string // set: a Windows node can mount it if its CSINode lists this driver
}

// storage follows each Windows pod's PersistentVolumeClaims to what Windows nodes would have to mount:
// the bound PersistentVolume's source, or the unbound claim's StorageClass provisioner, and for CSI
// whether the driver is registered on the Windows nodes (their CSINode objects). It reads only what
// the claims need, after every pod: the claims of namespaces with Windows pods that use claims, the
// volumes bound to them, the classes of unbound ones, and CSINodes when a CSI driver is in question.
type storage struct {
	pager *pager
	nodes *nodes
	out   *sink
	// claims are the claims of Windows pods, by namespace and name.
	claims map[string]map[string]*claimUse
}

func newStorage(p *pager, nodes *nodes, out *sink) *storage {
	return &storage{pager: p, nodes: nodes, out: out, claims: map[string]map[string]*claimUse{}}
}

// pod records the claims of a Windows pod: its persistentVolumeClaim volumes, and the claims its
// generic ephemeral volumes get (named pod-volume by the ephemeral volume controller). A pod that has
// finished mounts nothing any more.
func (s *storage) pod(p *corev1.Pod) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		var claim string
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = p.Name + "-" + v.Name
		default:
			continue
		}
		byName := s.claims[p.Namespace]
		if byName == nil {
			byName = map[string]*claimUse{}
			s.claims[p.Namespace] = byName
		}
		use := byName[claim]
		if use == nil {
			use = &claimUse{pod: p.Name, nodes: map[string]string{}}
			byName[claim] = use
		}
		if use.last == p.Name {
			continue
		}
		use.last = p.Name
		use.pods++
		if p.Name < use.pod {
			use.pod = p.Name
		}
		if first, ok := use.nodes[p.Spec.NodeName]; p.Spec.NodeName != "" && (!ok || p.Name < first) {
			use.nodes[p.Spec.NodeName] = p.Name
		}
	}
}

// judge reads what the claims need and reports those a Windows node cannot mount.
func (s *storage) judge(ctx context.Context) {
	if len(s.claims) == 0 {
		return
	}
	refs := s.readClaims(ctx)
	volumes, classes := map[string]*volumeVerdict{}, map[string]string{}
	for _, r := range refs {
		switch {
		case r.volume != "":
			volumes[r.volume] = nil
		case r.class != "":
			classes[r.class] = ""
		}
	}
	s.readVolumes(ctx, volumes)
	s.readClasses(ctx, classes)
	var drivers bool
	for _, v := range volumes {
		drivers = drivers || (v != nil && v.driver != "")
	}
	for _, p := range classes {
		drivers = drivers || p != ""
	}
	var registered *csiNodes
	if drivers {
		registered = s.readCSINodes(ctx)
	}
	for _, ns := range sortedKeys(s.claims) {
		for _, name := range sortedKeys(s.claims[ns]) {
			ref, ok := refs[ns+"/"+name]
			if !ok {
				continue
			}
			use := s.claims[ns][name]
			var v *volumeVerdict
			subject := "PersistentVolumeClaim " + name
			if ref.volume != "" {
				v = volumes[ref.volume]
				subject += " is bound to PersistentVolume " + ref.volume
			} else if p := classes[ref.class]; p != "" {
				v = classVerdict(p, registered)
				subject += " is not bound yet; its StorageClass " + ref.class + " provisions volumes"
			}
			if v == nil {
				continue
			}
			why, fix, pod := v.why, v.fix, use.pod
			if why == "" {
				why, fix, pod = registered.judge(v.driver, use, s.nodes)
			}
			if why == "" {
				continue
			}
			detail := fmt.Sprintf("%s (%s): %s; the pod stays in ContainerCreating; %s", subject, v.what, why, fix)
			if use.pods > 1 {
				detail += fmt.Sprintf(" (used by %d Windows pods)", use.pods)
			}
			s.out.finding(VolumeNotMountable, ns, "Pod/"+pod, detail)
		}
	}
}

// readClaims reads the claims of the namespaces with Windows pods that use claims, keeping what those
// claims refer to, by namespace/name.
func (s *storage) readClaims(ctx context.Context) map[string]claimVolume {
	refs := map[string]claimVolume{}
	for _, ns := range sortedKeys(s.claims) {
		err := s.pager.list(ctx, ns, func() client.ObjectList { return &corev1.PersistentVolumeClaimList{} }, nil, func(l client.ObjectList) {
			items := l.(*corev1.PersistentVolumeClaimList).Items
			for i := range items {
				c := &items[i]
				if s.claims[ns][c.Name] == nil {
					continue
				}
				// Bound, or being bound: spec.volumeName names the volume; else its class provisions one.
				ref := claimVolume{volume: c.Spec.VolumeName}
				if ref.volume == "" && c.Spec.StorageClassName != nil {
					ref.class = *c.Spec.StorageClassName
				}
				refs[ns+"/"+c.Name] = ref
			}
		})
		if err != nil {
			s.out.notRead(fmt.Sprintf("persistentvolumeclaims in %s: %s; the volumes of its Windows pods were not judged", ns, reason(err)))
		}
	}
	return refs
}

// readVolumes judges each volume named in volumes, leaving nil those that do not exist or say nothing.
func (s *storage) readVolumes(ctx context.Context, volumes map[string]*volumeVerdict) {
	if len(volumes) == 0 {
		return
	}
	err := s.pager.list(ctx, "", func() client.ObjectList { return &corev1.PersistentVolumeList{} }, nil, func(l client.ObjectList) {
		items := l.(*corev1.PersistentVolumeList).Items
		for i := range items {
			if _, needed := volumes[items[i].Name]; needed {
				volumes[items[i].Name] = volumeOf(&items[i])
			}
		}
	})
	if err != nil {
		clear(volumes)
		s.out.notRead("persistentvolumes: " + reason(err) + "; the volumes bound to Windows pods' claims were not judged")
	}
}

// volumeOf is what a Windows node would need to mount pv; nil when the audit cannot say.
func volumeOf(pv *corev1.PersistentVolume) *volumeVerdict {
	src := &pv.Spec.PersistentVolumeSource
	for _, u := range unmountableSources {
		if u.in(src) {
			return &volumeVerdict{what: u.field, why: u.why, fix: u.fix}
		}
	}
	if src.CSI != nil {
		return &volumeVerdict{what: "CSI driver " + src.CSI.Driver, driver: src.CSI.Driver}
	}
	// An in-tree source CSI migration serves: its CSI driver mounts it (the in-tree code is gone).
	tr := csitrans.New()
	if !tr.IsPVMigratable(pv) {
		return nil
	}
	plugin, err := tr.GetInTreePluginNameFromSpec(pv, nil)
	if err != nil {
		return nil
	}
	driver, err := tr.GetCSINameFromInTreeName(plugin)
	if err != nil {
		return nil
	}
	return &volumeVerdict{what: fmt.Sprintf("%s, mounted by CSI driver %s through CSI migration", plugin, driver), driver: driver}
}

// readClasses fills in the provisioner of each class named in classes.
func (s *storage) readClasses(ctx context.Context, classes map[string]string) {
	if len(classes) == 0 {
		return
	}
	err := s.pager.list(ctx, "", func() client.ObjectList { return &storagev1.StorageClassList{} }, nil, func(l client.ObjectList) {
		items := l.(*storagev1.StorageClassList).Items
		for i := range items {
			if _, needed := classes[items[i].Name]; needed {
				classes[items[i].Name] = items[i].Provisioner
			}
		}
	})
	if err != nil {
		clear(classes)
		s.out.notRead("storageclasses: " + reason(err) + "; unbound claims of Windows pods were not judged")
	}
}

// classVerdict is what a volume the provisioner makes would need: the CSI driver of that name (or the
// one CSI migration gives an in-tree provisioner), when some node's CSINode lists it. A provisioner no
// CSINode lists may not be a CSI driver at all (an external provisioner making NFS volumes, say): the
// audit says nothing of it until a volume is bound.
func classVerdict(provisioner string, registered *csiNodes) *volumeVerdict {
	tr := csitrans.New()
	if tr.IsMigratableIntreePluginByName(provisioner) {
		if driver, err := tr.GetCSINameFromInTreeName(provisioner); err == nil {
			return &volumeVerdict{what: fmt.Sprintf("%s, mounted by CSI driver %s through CSI migration", provisioner, driver), driver: driver}
		}
	}
	if registered == nil || !registered.anyNode[provisioner] {
		return nil
	}
	return &volumeVerdict{what: "CSI driver " + provisioner, driver: provisioner}
}

// csiNodes are the CSI drivers each node's CSINode lists: the drivers whose node plugin registered
// with the node's kubelet, which alone can mount their volumes there.
type csiNodes struct {
	onNode  map[string]map[string]bool // Windows node -> drivers
	anyNode map[string]bool            // drivers listed on some node, Windows or not
}

// readCSINodes reads the CSINodes; nil when they, or which nodes are Windows, cannot be read.
func (s *storage) readCSINodes(ctx context.Context) *csiNodes {
	if !s.nodes.known {
		s.out.note("CSI drivers of Windows pods' volumes not checked: the nodes could not be read, so which CSINodes are Windows nodes' is unknown")
		return nil
	}
	r := &csiNodes{onNode: map[string]map[string]bool{}, anyNode: map[string]bool{}}
	err := s.pager.list(ctx, "", func() client.ObjectList { return &storagev1.CSINodeList{} }, nil, func(l client.ObjectList) {
		items := l.(*storagev1.CSINodeList).Items
		for i := range items {
			windows := s.nodes.windows[items[i].Name]
			if windows {
				r.onNode[items[i].Name] = map[string]bool{}
			}
			for _, d := range items[i].Spec.Drivers {
				r.anyNode[d.Name] = true
				if windows {
					r.onNode[items[i].Name][d.Name] = true
				}
			}
		}
	})
	if err != nil {
		s.out.notRead("csinodes: " + reason(err) + "; the CSI drivers of Windows pods' volumes were not checked")
		return nil
	}
	return r
}

// judge says why driver cannot mount a claim's volume for the Windows pods in use, and the pod to
// name: it is registered on no Windows node, or not on some the pods are bound to (a pod there is
// named); "" when it can, or when the CSINodes are unknown or there are no Windows nodes to judge by.
func (r *csiNodes) judge(driver string, use *claimUse, nodes *nodes) (why, fix, pod string) {
	if r == nil || len(nodes.windows) == 0 {
		return "", "", ""
	}
	const fix0 = "deploy the driver's Windows node plugin (as HostProcess containers, or with csi-proxy), if it has one, or use storage whose driver does"
	var on []string
	for n, drivers := range r.onNode {
		if drivers[driver] {
			on = append(on, n)
		}
	}
	if len(on) == 0 {
		return fmt.Sprintf("driver %s is registered on no Windows node (no Windows node's CSINode lists it), so none can mount the volume", driver), fix0, use.pod
	}
	var missing []string
	for n := range use.nodes {
		if nodes.windows[n] && !r.onNode[n][driver] {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return "", "", ""
	}
	slices.Sort(missing)
	return fmt.Sprintf("driver %s is not registered on %s, where its pods run (not listed in the CSINode; it is on %s)", driver, nodeList(missing), nodeList(on)),
		"run the driver's node plugin on those nodes, or keep the pods to the nodes that have it", use.nodes[missing[0]]
}
