package audit

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// namespaces are the namespaces read and their labels, which the policy's rules read (scope, mode, the
// Windows test's default-os). They are read once, before any pod.
type namespaces struct {
	byName map[string]*corev1.Namespace
	// labelsUnknown are namespaces whose labels could not be read: no finding claims they are unlabelled.
	labelsUnknown map[string]bool
}

func newNamespaces() *namespaces {
	return &namespaces{byName: map[string]*corev1.Namespace{}, labelsUnknown: map[string]bool{}}
}

// read reads the namespaces named, or all of them; a named namespace whose labels are forbidden is kept
// without them, as its pods may still be readable.
func (n *namespaces) read(ctx context.Context, c client.Reader, names []string, out *sink) error {
	if len(names) > 0 {
		for _, name := range names {
			var ns corev1.Namespace
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
				if apierrors.IsNotFound(err) {
					return fmt.Errorf("namespace %s not found", name)
				}
				if apierrors.IsForbidden(err) {
					// Its labels are unknown, but its pods may still be readable.
					out.notRead(fmt.Sprintf("namespace %s: cannot read its labels (%s)", name, reason(err)))
					ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
					n.labelsUnknown[name] = true
				} else {
					return fmt.Errorf("reading namespace %s: %w", name, err)
				}
			}
			n.byName[name] = &ns
		}
		return nil
	}
	var list corev1.NamespaceList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range list.Items {
		n.byName[list.Items[i].Name] = &list.Items[i]
	}
	return nil
}

// facts are what the policy reads of namespace name; without labels when it was not read.
func (n *namespaces) facts(name string) policy.Namespace {
	facts := policy.Namespace{Name: name}
	if ns := n.byName[name]; ns != nil {
		facts.Labels, facts.Annotations = ns.Labels, ns.Annotations
	}
	return facts
}

// known reports whether namespace name was read (its labels may still be unknown: labelsUnknown).
func (n *namespaces) known(name string) bool { return n.byName[name] != nil }

func (n *namespaces) names() []string { return sortedKeys(n.byName) }
