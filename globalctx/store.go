package globalctx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
	"github.com/sprout-gitops/sprout/celenv"
)

// DefaultMaxEntries bounds how many entries one Sprout serves: each
// kubernetesResource entry holds its resource's objects in memory.
const DefaultMaxEntries = 100

// Options configure a Store.
type Options struct {
	// Client reads the entries and their resources, with Sprout's rights.
	Client dynamic.Interface
	// HTTP makes the apiCall entries' calls, to the hosts it allows; nil
	// allows none.
	HTTP *celenv.HTTP
	// API reads the urlPath of apiCall entries from the API server, with
	// Sprout's rights; nil fails them.
	API rest.Interface
	// ProofKey names the Secret that holds Sprout's proof key, which no
	// urlPath serves; nil hides none.
	ProofKey KeyHolder
	// WriteStatus writes each entry's Ready condition and lastRefreshTime
	// as Kyverno does. Leave it off where Kyverno's controller also serves
	// the entries, so that the two do not write the status in turn.
	WriteStatus bool
	// MaxEntries bounds the entries served; 0 is DefaultMaxEntries. An
	// entry past it is not loaded, and reads of it fail saying why.
	MaxEntries int
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// Store serves the GlobalContextEntries of the cluster. It implements
// celenv.GlobalContext.
type Store struct {
	opts Options
	log  *slog.Logger

	mu       sync.RWMutex
	entries  map[string]*entry
	synced   func() bool
	listErr  error
	notify   []func(name string)
	ctx      context.Context
	statuses *statusWriter
}

var _ celenv.GlobalContext = (*Store)(nil)

// New returns a store; Run serves the entries.
func New(opts Options) *Store {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{opts: opts, log: log, entries: map[string]*entry{}, synced: func() bool { return false },
		statuses: &statusWriter{client: opts.Client, enabled: opts.WriteStatus, log: log}}
}

// Notify adds f to the functions called with an entry's name each time
// what it serves changes: its data, its error, or the entry itself.
func (s *Store) Notify(f func(name string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify = append(s.notify, f)
}

// Run watches the entries and serves them until ctx ends.
func (s *Store) Run(ctx context.Context) {
	informer := dynamicinformer.NewFilteredDynamicInformer(s.opts.Client, v2beta1.Resource, "", 0, cache.Indexers{}, nil).Informer()
	_ = informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.mu.Lock()
		s.listErr = err
		s.mu.Unlock()
		s.log.Warn("cannot list GlobalContextEntries: globalContext.Get fails until it can", "error", err.Error())
	})
	s.mu.Lock()
	s.ctx, s.synced = ctx, informer.HasSynced
	s.mu.Unlock()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.upsert(obj) },
		UpdateFunc: func(_, obj any) { s.upsert(obj) },
		DeleteFunc: func(obj any) { s.remove(obj) },
	}); err != nil {
		s.log.Error("cannot watch GlobalContextEntries", "error", err.Error())
		return
	}
	informer.RunWithContext(ctx)
	s.mu.Lock()
	entries := s.entries
	s.entries = map[string]*entry{}
	s.mu.Unlock()
	// Stopped unlocked: a source stopping may be reporting to the store.
	for _, e := range entries {
		e.stop()
	}
}

// Get returns the data of entry name, or of its projection. An entry that
// does not exist is not found, as in Kyverno; before the entries are
// listed, every read fails.
func (s *Store) Get(ctx context.Context, name, projection string) (any, bool, error) {
	s.mu.RLock()
	e, ok := s.entries[name]
	synced, listErr := s.synced(), s.listErr
	s.mu.RUnlock()
	switch {
	case ok:
		v, err := e.get(ctx, projection)
		return v, true, err
	case !synced && listErr != nil:
		return nil, false, fmt.Errorf("the GlobalContextEntries are not listed: %w", listErr)
	case !synced:
		return nil, false, errors.New("the GlobalContextEntries are not listed yet")
	}
	return nil, false, nil
}

// Listed reports whether the entries have been listed, or, until they
// are, why they could not be: a one-off reader (sprout diff) waits for
// either before it evaluates.
func (s *Store) Listed() (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced(), s.listErr
}

// Read returns the read an entry's data comes from, which a policy's
// account must be allowed to serve it: the list of what a
// kubernetesResource entry caches, or the get or list of an apiCall's
// urlPath. ok is false for any other entry.
func (s *Store) Read(name string) (verb string, gvr schema.GroupVersionResource, namespace string, ok bool) {
	s.mu.RLock()
	e, found := s.entries[name]
	s.mu.RUnlock()
	if !found || e.read == nil {
		return "", schema.GroupVersionResource{}, "", false
	}
	return e.read.Verb, e.read.Resource, e.read.Namespace, true
}

// upsert serves a new entry, or serves a changed one afresh; a status
// write, which leaves the generation, changes nothing.
func (s *Store) upsert(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	gce := &v2beta1.GlobalContextEntry{}
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, gce)
	s.mu.Lock()
	old, exists := s.entries[u.GetName()]
	if exists && old.generation == u.GetGeneration() {
		s.mu.Unlock()
		return
	}
	gce.Name, gce.Generation = u.GetName(), u.GetGeneration()
	e := newEntry(gce)
	served := s.served()
	if exists && old.waiting == nil {
		served-- // replaced
	}
	full := err == nil && served >= s.opts.MaxEntries
	if full {
		e.waiting = gce
	}
	s.entries[e.name] = e
	ctx := s.ctx
	s.mu.Unlock()
	if exists {
		// Stopped unlocked: a source stopping may be reporting to the store.
		old.stop()
	}

	switch {
	case err != nil:
		s.loaded(e, nil, fmt.Errorf("GlobalContextEntry %s: %w", u.GetName(), err))
	case full:
		s.loaded(e, nil, fmt.Errorf("GlobalContextEntry %s: not loaded: Sprout serves at most %d entries (--global-context-max-entries)", e.name, s.opts.MaxEntries))
	default:
		s.start(ctx, e, gce)
	}
}

// start loads e's data in the background, or sets its error when the
// entry is invalid.
func (s *Store) start(ctx context.Context, e *entry, gce *v2beta1.GlobalContextEntry) {
	if errs := gce.Validate(); len(errs) > 0 {
		s.loaded(e, nil, fmt.Errorf("GlobalContextEntry %s: %w", e.name, errs.ToAggregate()))
		return
	}
	var src source
	if r := gce.Spec.KubernetesResource; r != nil {
		src = resourceSource{client: s.opts.Client, gvr: r.GVR(), namespace: r.Namespace}
	} else {
		call, err := newCallSource(s.opts.HTTP, s.opts.API, s.opts.ProofKey, gce.Spec.APICall)
		if err != nil {
			s.loaded(e, nil, fmt.Errorf("GlobalContextEntry %s: %w", e.name, err))
			return
		}
		src = call
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	e.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		src.run(ctx, entrySink{s: s, e: e, ctx: ctx})
	}()
}

func (s *Store) remove(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	s.mu.Lock()
	e, exists := s.entries[u.GetName()]
	delete(s.entries, u.GetName())
	next, gce := s.nextWaiting()
	ctx := s.ctx
	s.mu.Unlock()
	if exists {
		e.stop()
		s.changed(u.GetName())
	}
	if next != nil {
		s.start(ctx, next, gce)
	}
}

// served counts the entries loaded or loading. Called locked.
func (s *Store) served() int {
	n := 0
	for _, e := range s.entries {
		if e.waiting == nil {
			n++
		}
	}
	return n
}

// nextWaiting takes one entry that waits for room, if there is room.
// Called locked.
func (s *Store) nextWaiting() (*entry, *v2beta1.GlobalContextEntry) {
	if s.served() >= s.opts.MaxEntries {
		return nil, nil
	}
	for _, e := range s.entries {
		if gce := e.waiting; gce != nil {
			e.waiting = nil
			return e, gce
		}
	}
	return nil, nil
}

// loaded keeps what e's source loaded, writes the status and tells the
// listeners, unless only the same error came again.
func (s *Store) loaded(e *entry, data any, err error) {
	prev := e.state()
	if err != nil && prev != nil && prev.Error() == err.Error() {
		return
	}
	e.set(data, err)
	if err != nil {
		s.log.Warn("global context entry not loaded", "entry", e.name, "error", err.Error())
	}
	// Written when readiness or the error changes (the same error returned
	// above), not at every change of the data.
	if (prev == nil) != (err == nil) || err != nil {
		s.statuses.ready(s.ctxOf(), e.name, err)
	}
	s.changed(e.name)
}

func (s *Store) ctxOf() context.Context {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ctx
}

func (s *Store) changed(name string) {
	s.mu.RLock()
	notify := s.notify
	s.mu.RUnlock()
	for _, f := range notify {
		f(name)
	}
}

// entrySink is what a source of e reports to.
type entrySink struct {
	s   *Store
	e   *entry
	ctx context.Context
}

func (k entrySink) loaded(data any, err error) {
	if k.ctx.Err() != nil {
		return // replaced or deleted: a newer source speaks for the entry
	}
	k.s.loaded(k.e, data, err)
}

func (k entrySink) refreshed() {
	if k.ctx.Err() == nil {
		k.s.statuses.refreshed(k.ctx, k.e.name)
	}
}
