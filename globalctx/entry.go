package globalctx

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kyverno/go-jmespath"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
)

// source loads one entry's data: the objects of a resource, or the answer
// of a call.
type source interface {
	// run loads the data until ctx ends, telling s of each change.
	run(ctx context.Context, s sink)
}

// sink hears what a source loads.
type sink interface {
	// loaded is called with the data, or the error, each time either changes.
	loaded(data any, err error)
	// refreshed is called after each call that succeeded, changed or not.
	refreshed()
}

// projection is a named, compiled JMESPath expression.
type projection struct {
	name string
	jp   *jmespath.JMESPath
}

// entry is one GlobalContextEntry as served: its data and projections as
// last loaded, or why there are none.
type entry struct {
	name        string
	generation  int64
	projections []projection
	// read is what the entry's data is read from in the cluster, with
	// Sprout's rights; nil for a call to a web service.
	read *v2beta1.APIRead
	// waiting holds an entry not loaded as the store was full, until
	// another is deleted; nil otherwise. Guarded by the store's lock.
	waiting *v2beta1.GlobalContextEntry

	mu        sync.RWMutex
	loaded    chan struct{} // closed at the first load, data or error
	once      sync.Once
	data      any
	projected map[string]any
	err       error

	stop func()
}

// errNotLoaded is an entry's state before its first load.
var errNotLoaded = errors.New("not loaded yet")

func newEntry(gce *v2beta1.GlobalContextEntry) *entry {
	e := &entry{name: gce.Name, generation: gce.Generation, loaded: make(chan struct{}), err: errNotLoaded, stop: func() {}}
	switch spec := gce.Spec; {
	case spec.KubernetesResource != nil:
		e.read = &v2beta1.APIRead{Verb: "list", Resource: spec.KubernetesResource.GVR(), Namespace: spec.KubernetesResource.Namespace}
	case spec.APICall != nil && spec.APICall.URLPath != "":
		if read, ok := spec.APICall.Read(); ok { // validated
			e.read = &read
		}
	}
	for _, p := range gce.Spec.Projections {
		// Validated: the expression compiles.
		jp, err := jmespath.Compile(p.JMESPath)
		if err == nil {
			e.projections = append(e.projections, projection{name: p.Name, jp: jp})
		}
	}
	return e
}

// set keeps data, with its projections evaluated as Kyverno evaluates them,
// or err.
func (e *entry) set(data any, err error) {
	projected := map[string]any{}
	if err == nil {
		for _, p := range e.projections {
			v, perr := search(p.jp, data)
			if perr != nil {
				err = fmt.Errorf("projection %q: %w", p.name, perr)
				break
			}
			projected[p.name] = v
		}
	}
	e.mu.Lock()
	if err != nil {
		e.data, e.projected, e.err = nil, nil, err
	} else {
		e.data, e.projected, e.err = data, projected, nil
	}
	e.mu.Unlock()
	e.once.Do(func() { close(e.loaded) })
}

// get returns the data, or the projection's, waiting for the first load
// within ctx.
func (e *entry) get(ctx context.Context, projection string) (any, error) {
	select {
	case <-e.loaded:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", errNotLoaded, context.Cause(ctx))
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	switch {
	case e.err != nil:
		return nil, e.err
	case projection == "":
		return e.data, nil
	}
	v, ok := e.projected[projection]
	if !ok {
		return nil, fmt.Errorf("projection %q not found", projection)
	}
	return v, nil
}

// state is the entry's error, nil once loaded.
func (e *entry) state() error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.err
}
