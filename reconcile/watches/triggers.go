package watches

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
)

// Key names one trigger informer: a resource in every namespace (Namespace
// ""), or in one, and the objects of it that a label selector selects, all
// of them when Selector is "".
type Key struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Selector  string
}

func (k Key) String() string {
	s := k.Resource()
	if k.Selector != "" {
		s += " with " + k.Selector
	}
	return s
}

// Resource names what k watches, whatever its selector.
func (k Key) Resource() string {
	if k.Namespace == "" {
		return ResourceName(k.GVR)
	}
	return ResourceName(k.GVR) + " in " + k.Namespace
}

// ResourceName spells a resource as kubectl does: resource.version.group.
func ResourceName(gvr schema.GroupVersionResource) string {
	return strings.TrimSuffix(gvr.Resource+"."+gvr.Version+"."+gvr.Group, ".")
}

// TriggerHandler receives the events of the trigger informers.
type TriggerHandler interface {
	// Event is an event of informer w on obj: op is Create, Update or
	// Delete, or "" for an update that changed status alone; old is the
	// object an update replaced. Objects listed when an informer starts
	// existed before: they are no event.
	Event(w Key, op admission.Operation, obj, old *cluster.Object)
	// Listed says that w has listed what exists.
	Listed(w Key)
}

// Triggers runs the trigger informers.
type Triggers struct {
	client  dynamic.Interface
	raw     rest.Interface
	log     *slog.Logger
	handler TriggerHandler
	// proof verifies the proofs of triggers Sprout generated.
	proof *cluster.ProofKey

	mu        sync.RWMutex
	ctx       context.Context
	informers map[Key]*informer
}

// informer is one running informer.
type informer struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	// objects counts what the cache holds, from its handler's events:
	// listing the keys at each scrape cost a copy of every key, many times
	// a second under a tight scrape.
	objects atomic.Int64
	// updated holds, for objects whose last event was an update, the state
	// before it, for as long as whoever runs the informers asks.
	updated lastUpdates
	// listing hands out the objects of the first list as they come.
	listing *cluster.Listing
	// resource is what it watches; caughtUpFrom, the earliest revision a
	// catch-up began from (none: 0).
	resource     cluster.Resource
	caughtUpFrom uint64
}

// NewTriggers runs trigger informers through client and raw, handing their
// events to handler, once Start has given them a context; proof verifies
// the proofs of the triggers Sprout generated.
func NewTriggers(client dynamic.Interface, raw rest.Interface, proof *cluster.ProofKey, log *slog.Logger, handler TriggerHandler) *Triggers {
	return &Triggers{client: client, raw: raw, proof: proof, log: log, handler: handler, informers: map[Key]*informer{}}
}

// Start sets the context every informer runs under.
func (t *Triggers) Start(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ctx = ctx
}

// Ensure starts an informer for each of keys not running yet. Its cache
// holds cluster.Objects, made from its watch events' bytes.
//
// Triggers are watched in JSON, even built-in ones: watched in protobuf,
// as generated objects are, the Namespaces of make bench's burst were
// created with a higher Create p99 against the baseline's than in JSON,
// though Sprout spent no more CPU decoding them (docs/performance.md).
func (t *Triggers) Ensure(keys ...Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range keys {
		if _, ok := t.informers[w]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(t.ctx)
		listing := cluster.NewListing()
		r := cluster.Resource{GVR: w.GVR, Namespace: w.Namespace, LabelSelector: w.Selector, Listing: listing}
		inf := cluster.NewInformer(t.client, t.raw, r, nil, cluster.Triggers.WithProof(t.proof))
		ti := &informer{informer: inf, cancel: cancel, listing: listing, resource: r}
		_, _ = inf.AddEventHandler(t.events(w, ti))
		t.informers[w] = ti
		go inf.RunWithContext(ctx)
		started := time.Now()
		go func() {
			// A sync before the list is in waits: its policies go at once
			// when it is.
			listed := cache.WaitFor(ctx, "", inf.HasSyncedChecker())
			listing.End()
			if listed {
				t.log.Info("triggers listed", "resource", w.String(), "objects", len(inf.GetStore().ListKeys()), "duration", time.Since(started))
				t.handler.Listed(w)
			}
		}()
		t.log.Info("watching triggers", "resource", w.String())
	}
}

// CatchUp has the objects that changed since revision since come from
// the source first, before the list's (cluster.CatchUp): a restart's first
// sync finds a trigger created while Sprout was stopped at once, wherever
// the list would have brought it. It begins only before the informer has
// listed, and reports whether a catch-up runs, or ran, beside its list.
//
// Policies share an informer, each since its own record's last write:
// one watch, from the earliest revision asked for, serves them all, and
// each source takes as changed only what changed after its own revision.
// A source asking for an earlier revision than the watches running
// begins one more from it.
func (s *Source) CatchUp(since string) bool {
	rev, err := strconv.ParseUint(since, 10, 64)
	if s.listing == nil || err != nil {
		return false
	}
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	ti, ok := t.informers[s.key]
	if !ok || ti.listing != s.listing || ti.informer.HasSynced() {
		return false
	}
	s.since = rev
	if ti.caughtUpFrom != 0 && ti.caughtUpFrom <= rev {
		return true
	}
	ti.caughtUpFrom = rev
	go func() {
		if err := cluster.CatchUp(t.ctx, t.raw, ti.resource, since, cluster.Triggers.WithProof(t.proof), ti.listing); err != nil {
			t.log.Debug("a trigger list's catch-up ended", "resource", s.key.String(), "since", since, "error", err.Error())
		}
	}()
	return true
}

// events hands the informer's events to the handler, as admission events.
func (t *Triggers) events(w Key, ti *informer) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			ti.objects.Add(1)
			if o, ok := obj.(*cluster.Object); ok && !isInInitialList {
				t.handler.Event(w, admission.Create, o, nil)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*cluster.Object)
			n, ok2 := obj.(*cluster.Object)
			switch {
			case !ok1 || !ok2:
			case o.GetResourceVersion() == n.GetResourceVersion():
				// A re-list, not a change.
			case onlyStatusChanged(o, n):
				// A webhook on the resource never sees a status write (it
				// goes to the status subresource).
				t.handler.Event(w, "", n, o)
			default:
				t.handler.Event(w, admission.Update, n, o)
			}
		},
		DeleteFunc: func(obj any) {
			ti.objects.Add(-1)
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, ok := obj.(*cluster.Object); ok {
				t.handler.Event(w, admission.Delete, o, nil)
			}
		},
	}
}

// onlyStatusChanged reports whether an update changed nothing but status
// (and the metadata every write changes).
func onlyStatusChanged(oc, nc *cluster.Object) bool {
	o, n := oc.Decode(), nc.Decode()
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			if k != "status" && k != "metadata" {
				m[k] = v
			}
		}
		meta := u // decoded for this comparison alone
		meta.SetResourceVersion("")
		meta.SetManagedFields(nil)
		meta.SetGeneration(0)
		m["metadata"] = meta.Object["metadata"]
		return m
	}
	return equality.Semantic.DeepEqual(strip(o), strip(n))
}

// Release stops every informer needed does not hold. The caller holds what
// decides which are needed steady meanwhile, so that an informer a newer
// decision started is not stopped by an older one.
func (t *Triggers) Release(needed sets.Set[Key]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for w, ti := range t.informers {
		if !needed.Has(w) {
			ti.cancel()
			delete(t.informers, w)
			t.log.Info("stopped watching triggers", "resource", w.String())
		}
	}
}

// StopAll stops every informer.
func (t *Triggers) StopAll() { t.Release(nil) }

// Store returns the cache of w, and whether it has listed; nil when w is
// not watched.
func (t *Triggers) Store(w Key) (store cache.Store, synced bool) {
	t.mu.RLock()
	ti := t.informers[w]
	t.mu.RUnlock()
	if ti == nil {
		return nil, false
	}
	return ti.informer.GetStore(), ti.informer.HasSynced()
}

// Listing returns what w's first list has brought so far, while w has
// not listed; nil when it has, or is not watched.
func (t *Triggers) Listing(w Key) *cluster.Listing {
	t.mu.RLock()
	ti := t.informers[w]
	t.mu.RUnlock()
	if ti == nil || ti.informer.HasSynced() {
		return nil
	}
	return ti.listing
}

// WaitListed waits until w has listed what exists, or ctx is done; false
// when it is not watched or ctx ended first.
func (t *Triggers) WaitListed(ctx context.Context, w Key) (cache.Store, bool) {
	t.mu.RLock()
	ti := t.informers[w]
	t.mu.RUnlock()
	if ti == nil || !cache.WaitFor(ctx, "", ti.informer.HasSyncedChecker()) {
		return nil, false
	}
	return ti.informer.GetStore(), true
}

// Keys are the informers running.
func (t *Triggers) Keys() []Key {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]Key, 0, len(t.informers))
	for w := range t.informers {
		out = append(out, w)
	}
	return out
}

// Sizes counts what each running informer's cache holds.
func (t *Triggers) Sizes() map[Key]int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[Key]int, len(t.informers))
	for w, ti := range t.informers {
		out[w] = int(ti.objects.Load())
	}
	return out
}

// SetLastUpdate keeps old as the state of object uid before its last
// update, in w's informer; nil forgets it.
func (t *Triggers) SetLastUpdate(w Key, uid types.UID, old *cluster.Object) {
	t.mu.RLock()
	ti := t.informers[w]
	t.mu.RUnlock()
	if ti != nil {
		ti.updated.set(uid, old)
	}
}

// LastUpdate returns what SetLastUpdate kept of uid in w, or nil.
func (t *Triggers) LastUpdate(w Key, uid types.UID) *cluster.Object {
	t.mu.RLock()
	ti := t.informers[w]
	t.mu.RUnlock()
	if ti == nil {
		return nil
	}
	return ti.updated.get(uid)
}

// lastUpdates maps an object's UID to its state before its last update.
type lastUpdates struct {
	mu  sync.Mutex
	old map[types.UID]*cluster.Object
}

func (l *lastUpdates) set(uid types.UID, old *cluster.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old == nil {
		delete(l.old, uid)
		return
	}
	if l.old == nil {
		l.old = map[types.UID]*cluster.Object{}
	}
	l.old[uid] = old
}

func (l *lastUpdates) get(uid types.UID) *cluster.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.old[uid]
}

// ErrReleased says that a trigger informer was stopped while a Source
// waited for its list.
var ErrReleased = errors.New("trigger informer released")

// ErrNotListed says that a Source's listing brought nothing for
// ListingPatience, or broke off, and the informer has not listed: its
// reader should come back when it has (Handler.Listed) rather than hold on.
var ErrNotListed = errors.New("trigger list not in")

// ListingPatience is how long Next waits for the next object of a list
// whose pages are coming: a list that stalls (an API server slow to
// answer, a list that failed and is retried) must not hold a reader, a worker
// the other policies need, for longer.
const ListingPatience = time.Second

// Cached counts the cache's objects of sources, as far as they read
// their caches.
func Cached(sources []*Source) int {
	n := 0
	for _, s := range sources {
		n += s.Cached()
	}
	return n
}

// Source is what one reader takes of a trigger informer's objects: those
// of its first list as they come while it lists (Listing), then those of
// its cache that the list did not give.
type Source struct {
	t       *Triggers
	key     Key
	listing *cluster.Listing
	// taken are the objects the listing gave, passed over in the cache.
	taken  sets.Set[types.UID]
	cached []any
	i      int
	// changed counts the listing's objects known changed looked at
	// (CatchUp); fresh says the last object Next returned was one of them,
	// changed after since, the revision this source caught up from.
	changed int
	fresh   bool
	since   uint64
}

// Source begins a read of w's objects; false when w is not watched.
func (t *Triggers) Source(w Key) (*Source, bool) {
	store, synced := t.Store(w)
	if store == nil {
		return nil, false
	}
	s := &Source{t: t, key: w}
	if !synced {
		s.listing = t.Listing(w)
	}
	if s.listing == nil {
		s.cached = store.List()
	} else {
		s.taken = sets.New[types.UID]()
	}
	return s, true
}

// Cached counts the cache's objects, once the source reads the cache.
func (s *Source) Cached() int { return len(s.cached) }

// Fresh reports whether the object Next returned last was known changed
// since CatchUp's revision, and came before the list's.
func (s *Source) Fresh() bool { return s.fresh }

// Moved is closed when a list still coming brings an object or ends; nil
// once the source reads the cache.
func (s *Source) Moved() <-chan struct{} {
	if s.listing == nil {
		return nil
	}
	return s.listing.Moved()
}

// Exhausted reports whether every object has been taken.
func (s *Source) Exhausted() bool { return s.listing == nil && s.i == len(s.cached) }

// Next returns the next object: Ended when there is none left, NotYet
// when the list has not brought it. With wait, Next waits up to
// ListingPatience for the list's next object, and after a whole list for
// the cache to take it in; ErrNotListed when the list brought nothing
// meanwhile or broke off, ErrReleased when the informer stopped.
//
// While the list comes, the objects CatchUp found changed since the
// source's revision come first, once each (Fresh).
func (s *Source) Next(ctx context.Context, wait bool) (*cluster.Object, cluster.Taken, error) {
	s.fresh = false
	for {
		if s.listing != nil {
			if o, ok := s.listing.Changed(s.changed); ok {
				s.changed++
				// Changed since another policy's revision, not this one's:
				// it comes with the list.
				if s.changedSince(o) && !s.taken.Has(o.GetUID()) {
					s.taken.Insert(o.GetUID())
					s.fresh = true
					return o, cluster.Got, nil
				}
				continue
			}
			o, got, err := s.at(ctx, wait)
			switch {
			case err == nil && got == cluster.NotYet && wait:
				continue // woken by an object known changed
			case err != nil || got == cluster.NotYet:
				return nil, cluster.NotYet, err
			case got == cluster.Got:
				s.i++
				if s.taken.Has(o.GetUID()) {
					continue // taken as changed
				}
				s.taken.Insert(o.GetUID())
				return o, cluster.Got, nil
			}
			store, synced := s.t.Store(s.key)
			switch {
			case synced:
			case !wait:
				return nil, cluster.NotYet, nil
			case !s.listing.Whole():
				s.t.log.Info("a trigger list broke off: its reader comes back when the informer has listed", "resource", s.key.String())
				return nil, cluster.NotYet, ErrNotListed
			default:
				// The store takes in what the list brought: work of this
				// process alone, not worth a requeue.
				if store, synced = s.t.WaitListed(ctx, s.key); !synced {
					if err := ctx.Err(); err != nil {
						return nil, cluster.NotYet, err
					}
					return nil, cluster.NotYet, ErrReleased
				}
			}
			s.listing, s.cached, s.i = nil, store.List(), 0
		}
		if s.i == len(s.cached) {
			return nil, cluster.Ended, nil
		}
		u := s.cached[s.i].(*cluster.Object)
		s.i++
		if !s.taken.Has(u.GetUID()) {
			return u, cluster.Got, nil
		}
	}
}

// changedSince reports whether o changed after the source's revision.
// Revisions are one etcd's, so this compares two resources' (which the
// API does not promise): only an order of the match rests on it.
func (s *Source) changedSince(o *cluster.Object) bool {
	rev, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return s.since != 0 && err == nil && rev > s.since
}

// at is the listing's next object, with wait waited for up to
// ListingPatience.
func (s *Source) at(ctx context.Context, wait bool) (*cluster.Object, cluster.Taken, error) {
	if o, got, err := s.listing.At(ctx, s.i, false); !wait || got != cluster.NotYet || err != nil {
		return o, got, err
	}
	patient, cancel := context.WithTimeout(ctx, ListingPatience)
	defer cancel()
	o, got, err := s.listing.AtOrChanged(patient, s.i, s.changed)
	if err != nil && ctx.Err() == nil {
		s.t.log.Info("a trigger list brought nothing for a while: its reader comes back when the informer has listed", "resource", s.key.String(), "waited", ListingPatience)
		return nil, cluster.NotYet, ErrNotListed
	}
	return o, got, err
}
