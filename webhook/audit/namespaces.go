package audit

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// namespaces are the namespaces read and their labels, which the policy's rules read (scope, mode, the
// Windows test's default-os). They are read once, before any pod, page by page, and only what the
// policy reads of each is kept: a namespace's other annotations (kubectl's last-applied-configuration,
// say) can outweigh it many times.
type namespaces struct {
	byName map[string]*policy.Namespace
	// labelsUnknown are namespaces whose labels could not be read: no finding claims they are unlabelled.
	labelsUnknown map[string]bool
}

func newNamespaces() *namespaces {
	return &namespaces{byName: map[string]*policy.Namespace{}, labelsUnknown: map[string]bool{}}
}

// ownPrefix is the prefix of wincompat's labels and annotations.
const ownPrefix = "wincompat.io/"

// keep is what the policy reads of a namespace: its name, labels and wincompat's own annotations (the
// build a namespace asks for).
func (n *namespaces) keep(ns *corev1.Namespace) {
	kept := &policy.Namespace{Name: ns.Name, Labels: ns.Labels}
	for k, v := range ns.Annotations {
		if strings.HasPrefix(k, ownPrefix) {
			if kept.Annotations == nil {
				kept.Annotations = map[string]string{}
			}
			kept.Annotations[k] = v
		}
	}
	n.byName[ns.Name] = kept
}

// read reads the namespaces named, or all of them; a named namespace whose labels are forbidden is kept
// without them, as its pods may still be readable.
func (n *namespaces) read(ctx context.Context, pg *pager, names []string, out *sink) error {
	if len(names) > 0 {
		for _, name := range names {
			var ns corev1.Namespace
			if err := pg.c.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
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
			n.keep(&ns)
		}
		return nil
	}
	err := pg.list(ctx, "", func() client.ObjectList { return &corev1.NamespaceList{} }, nil, func(l client.ObjectList) {
		items := l.(*corev1.NamespaceList).Items
		for i := range items {
			n.keep(&items[i])
		}
	})
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	return nil
}

// facts are what the policy reads of namespace name; without labels when it was not read.
func (n *namespaces) facts(name string) policy.Namespace {
	if ns := n.byName[name]; ns != nil {
		return *ns
	}
	return policy.Namespace{Name: name}
}

// known reports whether namespace name was read (its labels may still be unknown: labelsUnknown).
func (n *namespaces) known(name string) bool { return n.byName[name] != nil }

func (n *namespaces) names() []string { return sortedKeys(n.byName) }
