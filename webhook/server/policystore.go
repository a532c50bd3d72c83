package server

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/webhook"
)

// fieldOwner is wincompat's name in the managed fields of what it writes by server-side apply.
const fieldOwner = "wincompat"

// LastGoodSuffix names the ConfigMap that keeps the last policy that loaded: <policy ConfigMap><suffix>.
const LastGoodSuffix = "-last-good"

// policyStore keeps the last good policy in a ConfigMap beside the policy's own, and reports about the
// policy ConfigMap with Events. The chart creates the kept ConfigMap empty, so wincompat needs only get
// and patch on that one name.
type policyStore struct {
	client   client.Client // reads straight from the API server: at start-up no cache runs yet
	policy   client.ObjectKey
	lastGood client.ObjectKey
	recorder events.EventRecorder
}

func newPolicyStore(c client.Client, namespace, policyConfigMap string) *policyStore {
	return &policyStore{
		client:   c,
		policy:   client.ObjectKey{Namespace: namespace, Name: policyConfigMap},
		lastGood: client.ObjectKey{Namespace: namespace, Name: policyConfigMap + LastGoodSuffix},
	}
}

func (s *policyStore) load(ctx context.Context) ([]byte, error) {
	var cm corev1.ConfigMap
	if err := s.client.Get(ctx, s.lastGood, &cm); err != nil {
		return nil, fmt.Errorf("reading the last good policy: %w", err)
	}
	data, ok := cm.Data[webhook.PolicyKey]
	if !ok {
		return nil, errors.New("no policy kept yet in " + s.lastGood.String())
	}
	return []byte(data), nil
}

// save writes the content by server-side apply: replicas saving the same content agree, and the chart's
// own fields (labels) stay the chart's.
func (s *policyStore) save(ctx context.Context, data []byte) error {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.lastGood.Namespace, Name: s.lastGood.Name},
		Data:       map[string]string{webhook.PolicyKey: string(data)},
	}
	//nolint:staticcheck // client.Apply with a typed object is the documented server-side apply for built-in types here.
	return s.client.Patch(ctx, cm, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// warn records a Warning Event about the policy ConfigMap, where `kubectl describe` shows it.
func (s *policyStore) warn(reason, action, note string, args ...any) {
	if s.recorder == nil {
		return
	}
	regarding := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.policy.Namespace, Name: s.policy.Name},
	}
	// An Event's note is at most 1 kB; the loader's messages list the known keys and can come close.
	msg := fmt.Sprintf(note, args...)
	if len(msg) > 1000 {
		msg = msg[:997] + "..."
	}
	s.recorder.Eventf(regarding, nil, corev1.EventTypeWarning, reason, action, "%s", msg)
}
