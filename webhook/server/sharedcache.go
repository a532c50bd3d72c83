package server

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// sharedKinds is the leader manager's cache. The kinds every replica already caches for admission
// (Nodes, Namespaces, RuntimeClasses) are read from the main manager's cache, so that a process holds
// one cache of each kind; the leader's own cache holds only what the leader alone reads (Windows pods).
// The handlers its controllers add to a shared informer are removed when the leader's manager stops, so
// that a replica that leads many times keeps none of a former term's.
type sharedKinds struct {
	cache.Cache // the leader's own
	shared      cache.Cache
	kinds       map[schema.GroupKind]bool
	scheme      *runtime.Scheme

	mu      sync.Mutex
	added   []registration
	stopped bool
}

type registration struct {
	informer cache.Informer
	handle   toolscache.ResourceEventHandlerRegistration
}

func (s *sharedKinds) isShared(obj runtime.Object) bool {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return false
	}
	return s.kinds[schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}]
}

func (s *sharedKinds) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if s.isShared(obj) {
		return s.shared.Get(ctx, key, obj, opts...)
	}
	return s.Cache.Get(ctx, key, obj, opts...)
}

func (s *sharedKinds) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if s.isShared(list) {
		return s.shared.List(ctx, list, opts...)
	}
	return s.Cache.List(ctx, list, opts...)
}

func (s *sharedKinds) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if !s.isShared(obj) {
		return s.Cache.GetInformer(ctx, obj, opts...)
	}
	i, err := s.shared.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	return &termInformer{Informer: i, term: s}, nil
}

func (s *sharedKinds) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if !s.kinds[gvk.GroupKind()] {
		return s.Cache.GetInformerForKind(ctx, gvk, opts...)
	}
	i, err := s.shared.GetInformerForKind(ctx, gvk, opts...)
	if err != nil {
		return nil, err
	}
	return &termInformer{Informer: i, term: s}, nil
}

// RemoveInformer never removes a shared informer: admission reads it on every replica.
func (s *sharedKinds) RemoveInformer(ctx context.Context, obj client.Object) error {
	if s.isShared(obj) {
		return nil
	}
	return s.Cache.RemoveInformer(ctx, obj)
}

func (s *sharedKinds) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if s.isShared(obj) {
		return s.shared.IndexField(ctx, obj, field, extract)
	}
	return s.Cache.IndexField(ctx, obj, field, extract)
}

// Start runs the leader's own cache; the main manager runs the shared one. When it ends, the handlers
// of this term go.
func (s *sharedKinds) Start(ctx context.Context) error {
	err := s.Cache.Start(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, r := range s.added {
		_ = r.informer.RemoveEventHandler(r.handle)
	}
	s.added = nil
	return err
}

func (s *sharedKinds) WaitForCacheSync(ctx context.Context) bool {
	return s.shared.WaitForCacheSync(ctx) && s.Cache.WaitForCacheSync(ctx)
}

func (s *sharedKinds) keep(i cache.Informer, h toolscache.ResourceEventHandlerRegistration, err error) (toolscache.ResourceEventHandlerRegistration, error) {
	if err != nil {
		return h, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		_ = i.RemoveEventHandler(h)
		return h, nil
	}
	s.added = append(s.added, registration{i, h})
	return h, nil
}

// termInformer is a shared informer whose handlers belong to one leader term.
type termInformer struct {
	cache.Informer
	term *sharedKinds
}

func (t *termInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	r, err := t.Informer.AddEventHandler(h)
	return t.term.keep(t.Informer, r, err)
}

func (t *termInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, p time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	r, err := t.Informer.AddEventHandlerWithResyncPeriod(h, p)
	return t.term.keep(t.Informer, r, err)
}

func (t *termInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	r, err := t.Informer.AddEventHandlerWithOptions(h, o)
	return t.term.keep(t.Informer, r, err)
}
