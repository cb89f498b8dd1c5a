package evaluate

import (
	"context"
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
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// Sync is what the evaluations of one sync of a policy read under.
type Sync struct {
	// Scope confines the informers reads start: a NamespacedGeneratingPolicy
	// reads only in its namespace, and so only that namespace is watched.
	Scope string
	// May, when set, says whether the ServiceAccount the policy runs as
	// may verb gvr in namespace: each kind of read is allowed only if the
	// API server says it may, asked once per sync. Nil: the policy runs as
	// Sprout, and may read what Sprout watches.
	May func(ctx context.Context, verb string, gvr schema.GroupVersionResource, namespace string) error
	// Read is told of a resource the first time the sync reads it, at
	// once, not once the sync ends: a change after this read is then
	// routed to the triggers that read.
	Read func(schema.GroupVersionResource)
	// Exceptions are the policy's exceptions kept between its syncs; nil
	// keeps none.
	Exceptions *PolicyExceptions
}

// Reader serves resource.Get and resource.List for the evaluations of one
// sync of a policy from informer caches, starting an informer the first
// time a resource is read. It records every resource read, which the
// policy's informers then serve, and each evaluation's reads (a tape): a
// change to an object read re-queues the triggers that read it, so a
// clone follows its source and a setting read from a ConfigMap takes
// effect.
type Reader struct {
	cache      func(ctx context.Context, scope string, gvr schema.GroupVersionResource) (cache.Store, error)
	kinds      Mapper
	scope      string
	may        func(ctx context.Context, verb string, gvr schema.GroupVersionResource, namespace string) error
	onRead     func(schema.GroupVersionResource)
	exceptions *PolicyExceptions
	// proof names the Secret of Sprout's proof key, which no policy reads.
	proof *cluster.ProofKey

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

var _ celenv.Reader = (*Reader)(nil)

// Reader returns the reader of one sync's evaluations.
func (e *Evaluator) Reader(s Sync) *Reader {
	r := &Reader{cache: e.cfg.Cache, kinds: e.cfg.Kinds, scope: s.Scope, may: s.May, onRead: s.Read, exceptions: s.Exceptions, proof: e.cfg.Proof,
		read: sets.New[schema.GroupVersionResource](), allowed: map[string]error{}, decoded: map[*cluster.Object]*unstructured.Unstructured{}}
	if e.cfg.HTTP != nil {
		r.web = e.cfg.HTTP.Round()
	}
	if e.cfg.GlobalContext != nil {
		r.entries = &entryReads{source: e.cfg.GlobalContext, reader: r, read: sets.New[string]()}
	}
	return r
}

// decode returns the cached object o decoded. Programs only read what they
// are given, so the sync's evaluations share it.
func (r *Reader) decode(o *cluster.Object) *unstructured.Unstructured {
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
func (r *Reader) authorize(ctx context.Context, verb string, gvr schema.GroupVersionResource, namespace string) error {
	if r.may == nil {
		return nil
	}
	key := verb + " " + gvr.String() + " " + namespace
	r.mu.Lock()
	err, ok := r.allowed[key]
	r.mu.Unlock()
	if ok {
		return err
	}
	err = r.may(ctx, verb, gvr, namespace)
	r.mu.Lock()
	r.allowed[key] = err
	r.mu.Unlock()
	return err
}

// store returns the synced cache of gvr, starting its informer if needed.
func (r *Reader) store(ctx context.Context, gvr schema.GroupVersionResource) (cache.Store, error) {
	r.reads.Add(1)
	r.mu.Lock()
	first := !r.read.Has(gvr)
	r.read.Insert(gvr)
	r.mu.Unlock()
	if first && r.onRead != nil {
		r.onRead(gvr)
	}
	return r.cache(ctx, r.scope, gvr)
}

// Get returns the cached object.
func (r *Reader) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (map[string]any, error) {
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
	if !ok || r.hidden(gvr, namespace, name) {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return r.decode(obj.(*cluster.Object)).Object, nil
}

// hidden reports whether the object is one no policy reads: the Secret
// of Sprout's proof key.
func (r *Reader) hidden(gvr schema.GroupVersionResource, namespace, name string) bool {
	return gvr.Group == "" && gvr.Resource == "secrets" && r.proof.Holds(namespace, name)
}

// List returns the cached objects of namespace ("" for all) that selector
// selects, as celenv.ListOf orders them.
func (r *Reader) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (map[string]any, error) {
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
		if o := obj.(*cluster.Object); !r.hidden(gvr, o.GetNamespace(), o.GetName()) {
			objs = append(objs, r.decode(o))
		}
	}
	return celenv.ListOf(gvr, objs, namespace, selector), nil
}

// ResourceFor asks the REST mapper for the resource of a kind.
func (r *Reader) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	m, err := r.kinds.Mapping(gvk)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return m.Resource, nil
}

// Reads counts the reads so far: an evaluation after which it is the same
// read no resource.
func (r *Reader) Reads() int64 { return r.reads.Load() }

// Resources returns the resources read.
func (r *Reader) Resources() sets.Set[schema.GroupVersionResource] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read.Clone()
}

// note records a read on the tape, if one records. A Get that finds
// nothing is recorded too: the object's creation changes its result.
func (r *Reader) note(d watches.Read) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tape != nil {
		r.tape.Note(d)
	}
}

// Record starts recording the reads of an evaluation.
func (r *Reader) Record() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tape = &watches.Tape{}
}

// Recorded stops recording and returns what the evaluation read.
func (r *Reader) Recorded() watches.Tape {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tape
	r.tape = nil
	if t == nil {
		return watches.Tape{}
	}
	return *t
}
