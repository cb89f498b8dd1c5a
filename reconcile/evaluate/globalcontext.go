package evaluate

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/celenv"
)

// GlobalContext serves globalContext.Get (the globalctx package's Store).
type GlobalContext interface {
	celenv.GlobalContext
	// Read returns the read on the API server an entry's data comes from:
	// the list a kubernetesResource entry caches, the get or list of an
	// apiCall's urlPath; ok is false for other entries.
	Read(name string) (verb string, gvr schema.GroupVersionResource, namespace string, ok bool)
	// Notify adds f to the functions called with an entry's name when
	// what it serves changes.
	Notify(f func(name string))
}

// entryReads serves globalContext.Get for the evaluations of one sync and
// records the entries read, so that a change of one re-queues the policy.
// A policy that runs as a ServiceAccount reads a kubernetesResource entry
// only if the account may list what it caches, and an apiCall's urlPath
// only if it may make that read: the entry's informer or calls run with
// Sprout's rights, which the account must not gain through it.
type entryReads struct {
	source GlobalContext
	reader *Reader

	mu   sync.Mutex
	read sets.Set[string]
}

var _ celenv.GlobalContext = (*entryReads)(nil)

func (e *entryReads) Get(ctx context.Context, name, projection string) (any, bool, error) {
	e.mu.Lock()
	e.read.Insert(name)
	e.mu.Unlock()
	if verb, gvr, namespace, ok := e.source.Read(name); ok {
		if err := e.reader.authorize(ctx, verb, gvr, namespace); err != nil {
			return nil, true, err
		}
	}
	return e.source.Get(ctx, name, projection)
}

// names returns the entries read.
func (e *entryReads) names() sets.Set[string] {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.read.Clone()
}

// Entries returns the GlobalContextEntries read; nil when no store serves
// entries.
func (r *Reader) Entries() sets.Set[string] { return r.entries.names() }

// globalContext is what the reader's evaluations read entries through;
// nil when no store serves entries.
func (r *Reader) globalContext() celenv.GlobalContext {
	if r.entries == nil {
		return nil
	}
	return r.entries
}
