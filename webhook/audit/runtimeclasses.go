package audit

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// classPins are the builds the cluster's RuntimeClasses select, for templates: the RuntimeClass
// admission plugin adds a class's nodeSelector to each pod, so a template's class pins its pods' build.
// Each class is read once per run.
type classPins struct {
	reader client.Reader
	out    *sink
	builds map[string]string // class name -> build, "" for none
	// noted: the note that RuntimeClasses could not be read is given once.
	noted bool
}

func newClassPins(reader client.Reader, out *sink) *classPins {
	return &classPins{reader: reader, out: out, builds: map[string]string{}}
}

// withClassPin adds the build the template's RuntimeClass selects to its nodeSelector, as the
// RuntimeClass admission plugin will for its pods (pods already carry it).
func (c *classPins) withClassPin(ctx context.Context, spec *corev1.PodSpec) *corev1.PodSpec {
	if spec.RuntimeClassName == nil {
		return spec
	}
	if _, set := spec.NodeSelector[corev1.LabelWindowsBuild]; set {
		return spec
	}
	b := c.build(ctx, *spec.RuntimeClassName)
	if b == "" {
		return spec
	}
	s := *spec
	s.NodeSelector = maps.Clone(s.NodeSelector)
	if s.NodeSelector == nil {
		s.NodeSelector = map[string]string{}
	}
	s.NodeSelector[corev1.LabelWindowsBuild] = b
	return &s
}

// build is the build a RuntimeClass selects, "" for none; read once per class and run.
func (c *classPins) build(ctx context.Context, name string) string {
	if b, ok := c.builds[name]; ok {
		return b
	}
	var rc nodev1.RuntimeClass
	err := c.reader.Get(ctx, client.ObjectKey{Name: name}, &rc)
	switch {
	case err == nil && rc.Scheduling != nil:
		c.builds[name] = rc.Scheduling.NodeSelector[corev1.LabelWindowsBuild]
	case err != nil && !apierrors.IsNotFound(err) && !c.noted:
		c.noted = true
		c.out.note("runtimeclasses: " + reason(err) + "; the builds RuntimeClasses select were not read")
	}
	return c.builds[name]
}
