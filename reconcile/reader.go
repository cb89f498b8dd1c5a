package reconcile

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// cacheReader serves resource.Get and resource.List for the syncs of one
// policy from informer caches, starting an informer the first time a
// resource is read. It records every resource read, which the policy's
// informers then serve, and each evaluation's reads (deps.go): a change
// to an object read re-queues the triggers that read it, so a clone
// follows its source and a setting read from a ConfigMap takes effect.
type cacheReader struct {
	c *Controller
	// key is the policy whose syncs read.
	key policy.Key
	// as, when set, is the ServiceAccount the policy runs as: each kind of
	// read is allowed only if the API server says it may (a
	// SubjectAccessReview, asked once per sync).
	as *access.Account
	// scope confines the informers it starts: a NamespacedGeneratingPolicy
	// reads only in its namespace, and so only that namespace is watched.
	scope string

	// reads counts the reads, so that an evaluation that read none is
	// told from one that did.
	reads atomic.Int64

	mu      sync.Mutex
	read    sets.Set[schema.GroupVersionResource]
	allowed map[string]error
	// decoded keeps the cached objects read, decoded once per sync: a
	// policy that clones one source for every trigger reads it each time.
	decoded map[*cluster.Object]*unstructured.Unstructured
	// web is the sync's round of http calls: the same request, asked for
	// every trigger, is made once.
	web *celenv.HTTPRound
	// entries serves globalContext.Get; nil when no store serves entries.
	entries *entryReads
	// tape records the reads of the evaluation under way, while one is
	// recorded: a sync evaluates its triggers one at a time.
	tape *watches.Tape
}

var _ celenv.Reader = (*cacheReader)(nil)

func newCacheReader(c *Controller, key policy.Key, as *access.Account, scope string) *cacheReader {
	r := &cacheReader{c: c, key: key, as: as, scope: scope, read: sets.New[schema.GroupVersionResource](), allowed: map[string]error{},
		decoded: map[*cluster.Object]*unstructured.Unstructured{}}
	if c.opts.HTTP != nil {
		r.web = c.opts.HTTP.Round()
	}
	if c.opts.GlobalContext != nil {
		r.entries = &entryReads{source: c.opts.GlobalContext, reader: r, read: sets.New[string]()}
	}
	return r
}

// decode returns the cached object o decoded. Programs only read what they
// are given, so the sync's evaluations share it.
func (r *cacheReader) decode(o *cluster.Object) *unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.decoded[o]
	if !ok {
		u = o.Decode()
		r.decoded[o] = u
	}
	return u
}

// authorize checks that the policy's account may verb gvr in namespace.
func (r *cacheReader) authorize(ctx context.Context, verb string, gvr schema.GroupVersionResource, namespace string) error {
	if r.as == nil {
		return nil
	}
	key := verb + " " + gvr.String() + " " + namespace
	r.mu.Lock()
	err, ok := r.allowed[key]
	r.mu.Unlock()
	if ok {
		return err
	}
	err = r.c.reviews.May(ctx, r.as, verb, gvr, namespace)
	r.mu.Lock()
	r.allowed[key] = err
	r.mu.Unlock()
	return err
}

// store returns the synced cache of gvr, starting its informer if needed.
func (r *cacheReader) store(ctx context.Context, gvr schema.GroupVersionResource) (cache.Store, error) {
	r.reads.Add(1)
	r.mu.Lock()
	first := !r.read.Has(gvr)
	r.read.Insert(gvr)
	r.mu.Unlock()
	if first {
		// At once, not once the sync ends: a change after this read is
		// then routed to the triggers that read (deps.go).
		r.c.states.of(r.key).setReads(sets.New(gvr), nil, true)
	}
	// Its informer runs as Sprout: one that may not list would fail for
	// ever. The read fails instead, and RBACPermissionsGranted says why.
	if err := r.c.reviews.MayWatch(ctx, nil, gvr, r.c.watchKeyOf(r.scope, gvr).Namespace); err != nil {
		return nil, err
	}
	w := r.c.watchKeyOf(r.scope, gvr)
	r.c.ensureInformers(w)
	store, ok := r.c.triggerInformers.WaitListed(ctx, w)
	switch {
	case ok:
		return store, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: cache did not sync: %w", resourceName(gvr), ctx.Err())
	}
	return nil, fmt.Errorf("%s: informer released while reading", resourceName(gvr))
}

// Get returns the cached object.
func (r *cacheReader) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (map[string]any, error) {
	r.note(watches.GetRead(gvr, namespace, name))
	if err := r.authorize(ctx, "get", gvr, namespace); err != nil {
		return nil, err
	}
	store, err := r.store(ctx, gvr)
	if err != nil {
		return nil, err
	}
	obj, ok, err := store.GetByKey(cache.NewObjectName(namespace, name).String())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return r.decode(obj.(*cluster.Object)).Object, nil
}

// List returns the cached objects of namespace ("" for all) that selector
// selects, as celenv.ListOf orders them.
func (r *cacheReader) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (map[string]any, error) {
	if selector == nil {
		selector = labels.Everything()
	}
	r.note(watches.ListRead(gvr, namespace, selector))
	if err := r.authorize(ctx, "list", gvr, namespace); err != nil {
		return nil, err
	}
	store, err := r.store(ctx, gvr)
	if err != nil {
		return nil, err
	}
	cached := store.List()
	objs := make([]*unstructured.Unstructured, 0, len(cached))
	for _, obj := range cached {
		objs = append(objs, r.decode(obj.(*cluster.Object)))
	}
	return celenv.ListOf(gvr, objs, namespace, selector), nil
}

// ResourceFor asks the REST mapper for the resource of a kind.
func (r *cacheReader) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	m, err := r.c.restMapping(gvk)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return m.Resource, nil
}

// resources returns what was read.
func (r *cacheReader) resources() sets.Set[schema.GroupVersionResource] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read.Clone()
}

// note records a read on the tape, if one records. A Get that finds
// nothing is recorded too: the object's creation changes its result.
func (r *cacheReader) note(d watches.Read) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tape != nil {
		r.tape.Note(d)
	}
}

// record starts recording the reads of an evaluation.
func (r *cacheReader) record() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tape = &watches.Tape{}
}

// recorded stops recording and returns what the evaluation read.
func (r *cacheReader) recorded() watches.Tape {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tape
	r.tape = nil
	if t == nil {
		return watches.Tape{}
	}
	return *t
}
