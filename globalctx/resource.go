package globalctx

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// resourceSource serves a kubernetesResource entry from its own informer,
// run with Sprout's rights: the objects of one resource, in one namespace
// or all, as a list ordered by namespace and name, so that the same objects
// always read the same.
type resourceSource struct {
	client    dynamic.Interface
	gvr       schema.GroupVersionResource
	namespace string
}

func (r resourceSource) run(ctx context.Context, s sink) {
	informer := dynamicinformer.NewFilteredDynamicInformer(r.client, r.gvr, r.namespace, 0, cache.Indexers{}, nil).Informer()
	// Bursts of events are read as one: a change marks the list stale and
	// the loop below lists once.
	stale := make(chan struct{}, 1)
	mark := func() {
		select {
		case stale <- struct{}{}:
		default:
		}
	}
	_ = informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		// Until it syncs, the entry's error is why: a resource that is not
		// served, or that Sprout may not list. After, the cache still
		// serves what it holds while the informer retries.
		if !informer.HasSynced() {
			s.loaded(nil, fmt.Errorf("listing %s: %w", resourceName(r.gvr), err))
		}
	})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { mark() },
		UpdateFunc: func(any, any) { mark() },
		DeleteFunc: func(any) { mark() },
	}); err != nil {
		s.loaded(nil, err)
		return
	}
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	mark()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stale:
			s.loaded(list(informer.GetStore()), nil)
		}
	}
}

// list is the store's objects in order. The objects are the cache's,
// shared: readers only read them.
func list(store cache.Store) []any {
	objs := store.List()
	slices.SortFunc(objs, func(a, b any) int {
		ua, ub := a.(*unstructured.Unstructured), b.(*unstructured.Unstructured)
		return cmp.Or(cmp.Compare(ua.GetNamespace(), ub.GetNamespace()), cmp.Compare(ua.GetName(), ub.GetName()))
	})
	out := make([]any, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*unstructured.Unstructured).Object)
	}
	return out
}

// resourceName spells a resource as kubectl does: resource.version.group.
func resourceName(gvr schema.GroupVersionResource) string {
	name := gvr.Resource + "." + gvr.Version
	if gvr.Group != "" {
		name += "." + gvr.Group
	}
	return name
}
