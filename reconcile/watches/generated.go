package watches

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// GeneratedSelector selects the objects Sprout generated.
const GeneratedSelector = sproutv1alpha1.LabelManagedBy + "=" + sproutv1alpha1.ManagedBy

// The indexes of the generated objects' caches.
const (
	// ByOwner indexes an object by the owner its annotation names
	// (cluster.Object.Owner), exactly: labels cut long names.
	ByOwner = "policy"
	// ByTrigger indexes an object by a bucket of its trigger's UID
	// (TriggerBucket). Buckets rather than UIDs, shared by every policy,
	// because client-go keeps a set per index value: with one object per
	// trigger, a set each would weigh more than the objects' own entries.
	ByTrigger = "trigger"
)

// triggerBuckets bounds the ByTrigger sets.
const triggerBuckets = 4096

// bucketSeed hashes trigger UIDs into buckets; a process's index and its
// lookups share it.
var bucketSeed = maphash.MakeSeed()

// TriggerBucket is the ByTrigger value of the objects generated for the
// trigger uid.
func TriggerBucket(uid string) string {
	return strconv.FormatUint(maphash.String(bucketSeed, uid)%triggerBuckets, 16)
}

func ownerIndex(obj any) ([]string, error) {
	o, _ := obj.(*cluster.Object)
	if o == nil || o.Owner() == "" {
		return nil, nil
	}
	return []string{o.Owner()}, nil
}

func triggerIndex(obj any) ([]string, error) {
	o, _ := obj.(*cluster.Object)
	if o == nil || o.TriggerUID() == "" {
		return nil, nil
	}
	return []string{TriggerBucket(o.TriggerUID())}, nil
}

// GeneratedHandler receives the events of the generated objects' informers.
type GeneratedHandler interface {
	// Added: obj is cached; listed when its informer started (initial),
	// or new since; store is the cache that holds it.
	Added(obj *cluster.Object, initial bool, store cache.Store)
	// Changed: old became obj (another version).
	Changed(old, obj any)
	// Deleted: obj is gone, or no longer labelled as Sprout's.
	Deleted(obj any)
}

// Generated runs a label-selected informer (only Sprout's objects, never
// every Secret of the cluster) on each resource Sprout generates objects
// of, holding them as cluster.Objects: a change to or deletion of one is
// seen without polling.
type Generated struct {
	client  dynamic.Interface
	raw     rest.Interface
	created *cluster.CreatedVersions
	// proof verifies the objects' proofs.
	proof *cluster.ProofKey
	// protobuf reports whether a resource is served in protobuf.
	protobuf func(schema.GroupVersionResource) bool
	log      *slog.Logger
	handler  GeneratedHandler

	mu        sync.RWMutex
	ctx       context.Context
	informers map[schema.GroupVersionResource]*informer
}

// NewGenerated runs informers through client and raw, pairing the
// versions created's creates made with their events and verifying the
// objects' proofs with proof, and hands their events to handler, once
// Start has given them a context.
func NewGenerated(client dynamic.Interface, raw rest.Interface, created *cluster.CreatedVersions, proof *cluster.ProofKey, protobuf func(schema.GroupVersionResource) bool, log *slog.Logger, handler GeneratedHandler) *Generated {
	return &Generated{client: client, raw: raw, created: created, proof: proof, protobuf: protobuf, log: log, handler: handler,
		informers: map[schema.GroupVersionResource]*informer{}}
}

// Start sets the context every informer runs under.
func (g *Generated) Start(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ctx = ctx
}

// Ensure starts an informer for each of gvrs not watched yet.
func (g *Generated) Ensure(gvrs sets.Set[schema.GroupVersionResource]) {
	// Asked before the lock is held: the answer may take discovery.
	protobuf := map[schema.GroupVersionResource]bool{}
	for gvr := range gvrs {
		if !g.watched(gvr) {
			protobuf[gvr] = g.protobuf(gvr)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for gvr := range gvrs {
		if _, ok := g.informers[gvr]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(g.ctx)
		inf := cluster.NewInformer(g.client, g.raw, cluster.Resource{GVR: gvr, LabelSelector: GeneratedSelector, Protobuf: protobuf[gvr], Cached: true},
			cache.Indexers{ByOwner: ownerIndex, ByTrigger: triggerIndex}, cluster.Generated(g.created).WithProof(g.proof))
		ti := &informer{informer: inf, cancel: cancel}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, isInInitialList bool) {
				ti.objects.Add(1)
				if o, ok := obj.(*cluster.Object); ok {
					g.handler.Added(o, isInInitialList, inf.GetStore())
				}
			},
			UpdateFunc: func(old, obj any) {
				o, _ := old.(*cluster.Object)
				n, _ := obj.(*cluster.Object)
				if o == nil || n == nil || o.GetResourceVersion() != n.GetResourceVersion() {
					g.handler.Changed(old, obj)
				}
			},
			DeleteFunc: func(obj any) {
				ti.objects.Add(-1)
				g.handler.Deleted(obj)
			},
		})
		g.informers[gvr] = ti
		go inf.RunWithContext(ctx)
		g.log.Info("watching generated objects", "resource", ResourceName(gvr))
	}
}

func (g *Generated) watched(gvr schema.GroupVersionResource) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	_, ok := g.informers[gvr]
	return ok
}

// Synced reports whether the informers of gvrs have listed.
func (g *Generated) Synced(gvrs sets.Set[schema.GroupVersionResource]) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for gvr := range gvrs {
		ti, ok := g.informers[gvr]
		if !ok || !ti.informer.HasSynced() {
			return false
		}
	}
	return true
}

// WaitSynced waits up to timeout for the informers of gvrs to list: woken
// by their lists' ends, not by polling, which made a sync wait up to a
// poll's interval more and cost CPU while it waited. A resource not
// watched is not waited for; it is not synced.
func (g *Generated) WaitSynced(ctx context.Context, gvrs sets.Set[schema.GroupVersionResource], timeout time.Duration) bool {
	if g.Synced(gvrs) {
		// What every sync after the first finds: no goroutine and timer
		// are started to wait for nothing.
		return true
	}
	g.mu.RLock()
	listed := make([]cache.DoneChecker, 0, len(gvrs))
	for gvr := range gvrs {
		ti, ok := g.informers[gvr]
		if !ok {
			g.mu.RUnlock()
			return false
		}
		listed = append(listed, ti.informer.HasSyncedChecker())
	}
	g.mu.RUnlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return cache.WaitFor(ctx, "", listed...)
}

// ByIndex lists the cached objects of gvr that index holds under value.
func (g *Generated) ByIndex(gvr schema.GroupVersionResource, index, value string) ([]any, error) {
	g.mu.RLock()
	ti, ok := g.informers[gvr]
	g.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s is not watched", ResourceName(gvr))
	}
	return ti.informer.GetIndexer().ByIndex(index, value)
}

// Informer returns the informer of gvr, if it is watched.
func (g *Generated) Informer(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	ti, ok := g.informers[gvr]
	if !ok {
		return nil, false
	}
	return ti.informer, true
}

// Release stops the informers of resources written does not hold.
func (g *Generated) Release(written sets.Set[schema.GroupVersionResource]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for gvr, ti := range g.informers {
		if !written.Has(gvr) {
			ti.cancel()
			delete(g.informers, gvr)
			g.log.Info("stopped watching generated objects", "resource", ResourceName(gvr))
		}
	}
}

// StopAll stops every informer.
func (g *Generated) StopAll() { g.Release(nil) }

// Sizes counts what each running informer's cache holds.
func (g *Generated) Sizes() map[schema.GroupVersionResource]int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make(map[schema.GroupVersionResource]int, len(g.informers))
	for gvr, ti := range g.informers {
		out[gvr] = int(ti.objects.Load())
	}
	return out
}

// Live serves inventory's lookups (inventory.Live) from the generated
// objects' caches: resource maps a kind to the resource whose informer
// holds its objects.
type Live struct {
	generated *Generated
	resource  func(schema.GroupVersionKind) (schema.GroupVersionResource, error)
}

// Live returns the lookups of g's caches, kinds mapped by resource.
func (g *Generated) Live(resource func(schema.GroupVersionKind) (schema.GroupVersionResource, error)) Live {
	return Live{generated: g, resource: resource}
}

func (l Live) Get(gvk schema.GroupVersionKind, namespace, name string) (*cluster.Object, bool) {
	inf, ok := l.informer(gvk)
	if !ok {
		return nil, false
	}
	cached, ok, err := inf.GetStore().GetByKey(cache.NewObjectName(namespace, name).String())
	if err != nil || !ok {
		return nil, false
	}
	return cached.(*cluster.Object), true
}

// Seen compares the version the cache of gvk's resource last stored, from
// an event or a bookmark, with resourceVersion. Versions that do not
// compare (a storage other than etcd) count as seen: the object is then
// written, and a create that finds it is told so.
//
// The store's version, not the watch's: an event is read some time before
// the store holds it, and an object created, looked for in between, would
// seem deleted since and be created again. Without client-go's AtomicFIFO
// the store keeps no version, and the watch's is all there is.
func (l Live) Seen(gvk schema.GroupVersionKind, resourceVersion string) bool {
	inf, ok := l.informer(gvk)
	if !ok {
		return true // not watched: nothing is cached, so nothing will be
	}
	stored := inf.GetStore().LastStoreSyncResourceVersion()
	if stored == "" {
		stored = inf.LastSyncResourceVersion()
	}
	c, err := resourceversion.CompareResourceVersion(stored, resourceVersion)
	return err != nil || c >= 0
}

// informer returns the informer of the resource of kind gvk.
func (l Live) informer(gvk schema.GroupVersionKind) (cache.SharedIndexInformer, bool) {
	gvr, err := l.resource(gvk)
	if err != nil {
		return nil, false
	}
	return l.generated.Informer(gvr)
}
