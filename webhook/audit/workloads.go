package audit

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// workloadLists are the eight kinds whose templates wincompat annotates, with their API groups and list
// types. A controller comes before the kinds it controls (CronJob before Job), so that when an object is
// read, whether its controller was read is already known (controlledByRead).
var workloadLists = []workloadList{
	{"Deployment", "apps", func() client.ObjectList { return &appsv1.DeploymentList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*appsv1.DeploymentList).Items, func(o *appsv1.Deployment) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"ReplicaSet", "apps", func() client.ObjectList { return &appsv1.ReplicaSetList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*appsv1.ReplicaSetList).Items, func(o *appsv1.ReplicaSet) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"StatefulSet", "apps", func() client.ObjectList { return &appsv1.StatefulSetList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*appsv1.StatefulSetList).Items, func(o *appsv1.StatefulSet) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"DaemonSet", "apps", func() client.ObjectList { return &appsv1.DaemonSetList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*appsv1.DaemonSetList).Items, func(o *appsv1.DaemonSet) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"CronJob", "batch", func() client.ObjectList { return &batchv1.CronJobList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*batchv1.CronJobList).Items, func(o *batchv1.CronJob) templateOf {
			return templateOf{o.ObjectMeta, o.Spec.JobTemplate.Spec.Template}
		})
	}},
	{"Job", "batch", func() client.ObjectList { return &batchv1.JobList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*batchv1.JobList).Items, func(o *batchv1.Job) templateOf { return templateOf{o.ObjectMeta, o.Spec.Template} })
	}},
	{"ReplicationController", "", func() client.ObjectList { return &corev1.ReplicationControllerList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*corev1.ReplicationControllerList).Items, func(o *corev1.ReplicationController) templateOf {
			if o.Spec.Template == nil {
				return templateOf{meta: o.ObjectMeta}
			}
			return templateOf{o.ObjectMeta, *o.Spec.Template}
		})
	}},
	{"PodTemplate", "", func() client.ObjectList { return &corev1.PodTemplateList{} }, func(l client.ObjectList) []templateOf {
		return templates(l.(*corev1.PodTemplateList).Items, func(o *corev1.PodTemplate) templateOf { return templateOf{o.ObjectMeta, o.Template} })
	}},
}

type workloadList struct {
	kind, group string
	list        func() client.ObjectList
	tpl         func(client.ObjectList) []templateOf
}

type templateOf struct {
	meta metav1.ObjectMeta
	tpl  corev1.PodTemplateSpec
}

func templates[T any](items []T, f func(*T) templateOf) []templateOf {
	out := make([]templateOf, len(items))
	for i := range items {
		out[i] = f(&items[i])
	}
	return out
}

// controllers remember which workloads this run read, so that an object another read workload controls
// is judged through its controller.
type controllers struct {
	selector labels.Selector
	// kindsRead marks the workload kinds read completely, by kind and scope ("Deployment/" for all
	// namespaces): an object such a kind controls is judged through its controller.
	kindsRead map[string]bool
	// ownersRead are, with a label selector, the UIDs of the workloads read: a selector may pick an
	// object and not its controller. Without one, kindsRead says as much in constant memory.
	ownersRead map[types.UID]bool
}

func newControllers(selector labels.Selector) *controllers {
	return &controllers{selector: selector, kindsRead: map[string]bool{}, ownersRead: map[types.UID]bool{}}
}

// listed marks kind as read completely in ns ("" for all namespaces).
func (c *controllers) listed(kind, ns string) { c.kindsRead[kind+"/"+ns] = true }

// saw notes a workload read, when a selector may have left its controller out.
func (c *controllers) saw(meta *metav1.ObjectMeta) {
	if !c.selector.Empty() {
		c.ownersRead[meta.UID] = true
	}
}

// controlledByRead reports whether meta's controller is a workload this run read (a Deployment of a
// ReplicaSet, a CronJob of a Job): the findings on the controller's template cover meta, whose own
// template is an old revision or a copy of it.
func (c *controllers) controlledByRead(meta *metav1.ObjectMeta) bool {
	ref := metav1.GetControllerOfNoCopy(meta)
	if ref == nil || !auditedKind(ref) {
		return false
	}
	if !c.selector.Empty() {
		return c.ownersRead[ref.UID]
	}
	return c.kindsRead[ref.Kind+"/"] || c.kindsRead[ref.Kind+"/"+meta.Namespace]
}

// auditedKind reports whether ref names one of the workload kinds the audit reads.
func auditedKind(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(workloadLists, func(w workloadList) bool { return w.kind == ref.Kind && w.group == gv.Group })
}
