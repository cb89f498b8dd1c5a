// Package kinds owns what Sprout knows of the API server's kinds and
// resources: discovery, cached until it is reset, the mapping of a kind to
// its resource, and whether a resource is namespaced. It knows nothing of
// policies.
package kinds

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// Kinds answers from discovery, cached.
type Kinds struct {
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.ResettableRESTMapper
	// mappings keeps Mapping's answers, by kind, until Reset: a sync maps
	// every object it writes.
	mappings sync.Map
	// resynced keeps, after Resync forgot them, the mappings known before:
	// while discovery cannot answer (the API server down at the resync), a
	// kind known before maps as it did, instead of every lookup asking
	// discovery again.
	resynced sync.Map
	// namespaced says, per resource discovery listed, whether it is
	// namespaced.
	namespaced sync.Map
}

// New asks client.
func New(client discovery.DiscoveryInterface) *Kinds {
	disco := memory.NewMemCacheClient(client)
	return &Kinds{discovery: disco, mapper: restmapper.NewDeferredDiscoveryRESTMapper(disco)}
}

// FromMapper answers from mapper alone, with no discovery to list: for
// what knows its kinds beforehand, such as benchmarks.
func FromMapper(mapper meta.ResettableRESTMapper) *Kinds { return &Kinds{mapper: mapper} }

// Mapping maps a kind to its resource. A kind the cached discovery does
// not know (a CRD installed since) resets the cache once and asks again.
func (k *Kinds) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if m, ok := k.mappings.Load(gvk); ok {
		return m.(*meta.RESTMapping), nil
	}
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		k.Reset()
		m, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil && !meta.IsNoMatchError(err) {
		if known, ok := k.resynced.Load(gvk); ok {
			m, err = known.(*meta.RESTMapping), nil
		}
	}
	if err == nil {
		k.mappings.Store(gvk, m)
	}
	return m, err
}

// KindFor maps a resource to its kind.
func (k *Kinds) KindFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return k.mapper.KindFor(gvr)
}

// Reset forgets what discovery found, so that it is asked again.
func (k *Kinds) Reset() {
	k.mapper.Reset()
	k.mappings.Clear()
}

// Resync resets discovery, keeping the mappings known so far for when it
// cannot answer.
func (k *Kinds) Resync() {
	k.resynced.Clear()
	k.mappings.Range(func(key, v any) bool { k.resynced.Store(key, v); return true })
	k.Reset()
}

// Invalidate makes the next listing ask discovery again.
func (k *Kinds) Invalidate() {
	if k.discovery != nil {
		k.discovery.Invalidate()
	}
}

// Resources lists what the API server serves, from the cache, and learns
// which resources are namespaced. A partial failure lists what answered,
// with the error.
func (k *Kinds) Resources() ([]*metav1.APIResourceList, error) {
	if k.discovery == nil {
		return nil, nil
	}
	_, lists, err := k.discovery.ServerGroupsAndResources()
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		for _, res := range list.APIResources {
			k.namespaced.Store(gv.WithResource(res.Name), res.Namespaced)
		}
	}
	return lists, err
}

// Namespaced reports whether gvr is namespaced, if a listing has told.
func (k *Kinds) Namespaced(gvr schema.GroupVersionResource) (namespaced, known bool) {
	v, ok := k.namespaced.Load(gvr)
	if !ok {
		return false, false
	}
	return v.(bool), true
}

// RESTMapper is the mapper Kinds answers from, as a meta.RESTMapper for
// clients that write (inventory.NewApplier): its RESTMapping is Mapping,
// so what one write has mapped the others find mapped, and a kind
// discovery has not seen yet resets it once.
func (k *Kinds) RESTMapper() meta.RESTMapper { return restMapper{k.mapper, k} }

type restMapper struct {
	meta.RESTMapper
	k *Kinds
}

func (m restMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	return m.k.Mapping(gk.WithVersion(versions[0]))
}
