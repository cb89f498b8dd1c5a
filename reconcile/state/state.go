// Package state is what the reconcile core keeps of each policy between
// its syncs: one State per policy, made when the policy enters and dropped
// in one place when it leaves (States.Enter, States.Drop, both the core's
// calls). A State holds the parts' own per-policy values (the ledger's
// entry, what was told of the policy, its PolicyExceptions), its
// tombstones, what its syncs read, and the incremental sync's tally, of a
// type the core gives (T): the package knows nothing of syncs. Every
// method of a nil State keeps nothing and answers the zero value, so a
// sync that ends after its policy left keeps nothing.
package state

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// State is what this replica keeps of one policy between its syncs,
// beside its compiled generation; T is the incremental sync's tally.
type State[T any] struct {
	mu sync.Mutex
	// tally is what the last clean full sync found per trigger, for the
	// incremental syncs after it; nil: the next sync is a full one.
	tally *T
	// waits counts the syncs in a row that had to wait for a cache.
	waits int
	// roles are the roles its bindings referred to in its last sync.
	roles access.RoleRefs
	// told is what was told of it: its status, Events and verdict.
	told report.Told

	// entry is what the ledger keeps of the policy: what its record holds
	// (the resources it wrote to, the triggers events admitted, what it
	// generated or claims) and the objects it wrote while Sprout runs.
	entry ledger.Entry
	// tombstones are the last states of deleted triggers whose DELETE the
	// policy's rules select, until a sync has generated from them. They
	// are not persisted: a deletion while Sprout is stopped cannot be
	// replayed (docs/decisions.md).
	tombstones map[types.UID]policy.Trigger

	// downstreamEpoch counts the updates and deletions the downstream
	// informers delivered of the policy's objects (settledAt).
	downstreamEpoch atomic.Uint64
	// readResources and readEntries are the resources and
	// GlobalContextEntries its syncs read (recordReads), whose changes
	// queue it. Each set is replaced, never changed, so that a watch event
	// asks it without a lock.
	readResources atomic.Pointer[sets.Set[schema.GroupVersionResource]]
	readEntries   atomic.Pointer[sets.Set[string]]
	// exceptions are the set of PolicyExceptions its evaluations run
	// under, and the skips last told.
	exceptions evaluate.PolicyExceptions
}

// States holds the state of every policy this replica runs.
type States[T any] struct {
	mu sync.RWMutex
	m  map[policy.Key]*State[T]
}

// Enter returns the state of key, made if the policy had none.
func (s *States[T]) Enter(key policy.Key) *State[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[key]; ok {
		return st
	}
	if s.m == nil {
		s.m = map[policy.Key]*State[T]{}
	}
	st := &State[T]{}
	s.m[key] = st
	return st
}

// Of returns the state Of key; a policy that is not running has none, and
// every method Of a nil state keeps nothing and answers the zero value.
func (s *States[T]) Of(key policy.Key) *State[T] {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[key]
}

// Drop forgets key's state.
func (s *States[T]) Drop(key policy.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// Each calls f with every state.
func (s *States[T]) Each(f func(policy.Key, *State[T])) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, st := range s.m {
		f(k, st)
	}
}

// Len counts the states kept.
func (s *States[T]) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// with runs f under the state's lock; on a nil state, not at all.
func (st *State[T]) with(f func(*State[T])) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	f(st)
}

// Tally returns the tally kept, or nil.
func (st *State[T]) Tally() (t *T) {
	st.with(func(st *State[T]) { t = st.tally })
	return t
}

// SetTally keeps t; nil forgets it, and the next sync is a full one.
func (st *State[T]) SetTally(t *T) { st.with(func(st *State[T]) { st.tally = t }) }

// Waited counts a sync that waited for a cache, and returns how many in a
// row did; Done resets the count.
func (st *State[T]) Waited() (n int) {
	st.with(func(st *State[T]) { st.waits++; n = st.waits })
	return n
}

func (st *State[T]) Done() { st.with(func(st *State[T]) { st.waits = 0 }) }

// Bound keeps the roles the policy's bindings referred to in a sync. A
// sync that stopped before judging every binding only adds to them.
func (st *State[T]) Bound(refs access.RoleRefs, complete bool) {
	st.with(func(st *State[T]) {
		if complete || st.roles.Names == nil {
			st.roles = refs
			return
		}
		st.roles = st.roles.Merge(refs)
	})
}

// BoundTo reports whether the policy's bindings referred to role, or to
// an aggregated ClusterRole that a ClusterRole may join.
func (st *State[T]) BoundTo(role string, clusterRole bool) (yes bool) {
	st.with(func(st *State[T]) { yes = st.roles.Names != nil && st.roles.Has(role, clusterRole) })
	return yes
}

// DownstreamChanged counts an update or deletion of one of the policy's
// objects.
func (st *State[T]) DownstreamChanged() {
	if st != nil {
		st.downstreamEpoch.Add(1)
	}
}

// Epoch is the count of downstream changes now.
func (st *State[T]) Epoch() uint64 {
	if st == nil {
		return 0
	}
	return st.downstreamEpoch.Load()
}

// Reads returns the resources the policy's syncs read; nil for none.
func (st *State[T]) Reads() sets.Set[schema.GroupVersionResource] {
	if st == nil {
		return nil
	}
	if p := st.readResources.Load(); p != nil {
		return *p
	}
	return nil
}

// ReadsFrom reports whether the policy's syncs read gvr.
func (st *State[T]) ReadsFrom(gvr schema.GroupVersionResource) bool { return st.Reads().Has(gvr) }

// SetReads records what a full sync read: it replaces what was recorded.
// add, what an incremental one read: it adds to it.
func (st *State[T]) SetReads(resources sets.Set[schema.GroupVersionResource], entries sets.Set[string], add bool) {
	st.with(func(st *State[T]) {
		if add {
			resources = st.Reads().Union(resources)
			if p := st.readEntries.Load(); p != nil {
				entries = p.Union(entries)
			}
		}
		st.readResources.Store(&resources)
		st.readEntries.Store(&entries)
	})
}

// ForgetReads forgets what the policy's syncs read.
func (st *State[T]) ForgetReads() { st.SetReads(nil, nil, false) }

// ReadsEntry reports whether the policy's syncs read GlobalContextEntry
// name.
func (st *State[T]) ReadsEntry(name string) bool {
	if st == nil {
		return false
	}
	p := st.readEntries.Load()
	return p != nil && p.Has(name)
}

// Exceptions returns what the policy keeps of its exceptions; nil for
// a policy that is not running.
func (st *State[T]) Exceptions() *evaluate.PolicyExceptions {
	if st == nil {
		return nil
	}
	return &st.exceptions
}

// AddTombstone keeps a deleted trigger's last state.
func (st *State[T]) AddTombstone(tr policy.Trigger) {
	st.with(func(st *State[T]) {
		if st.tombstones == nil {
			st.tombstones = map[types.UID]policy.Trigger{}
		}
		st.tombstones[tr.Object.GetUID()] = tr
	})
}

// PendingTombstones returns the deleted triggers not generated from yet.
func (st *State[T]) PendingTombstones() (out []policy.Trigger) {
	st.with(func(st *State[T]) {
		for _, tr := range st.tombstones {
			out = append(out, tr)
		}
	})
	return out
}

// Tombstoned returns the UIDs of the deleted triggers not generated from
// yet.
func (st *State[T]) Tombstoned() sets.Set[string] {
	pending := sets.New[string]()
	for _, t := range st.PendingTombstones() {
		pending.Insert(string(t.Object.GetUID()))
	}
	return pending
}

// TombstonesDone forgets the tombstones generated from.
func (st *State[T]) TombstonesDone(trs []policy.Trigger) {
	st.with(func(st *State[T]) {
		for _, tr := range trs {
			delete(st.tombstones, tr.Object.GetUID())
		}
	})
}

// ForgetEvents forgets what events taught about the policy: the triggers
// they admitted and the tombstones they left. A policy that stops running
// and comes back under the same name is another: what it admits, its
// record says.
func (st *State[T]) ForgetEvents() {
	st.Ledger().ForgetAdmissions()
	st.with(func(st *State[T]) { st.tombstones = nil })
}

// Ledger is the Ledger's entry of the policy; nil when the policy does
// not run, which keeps nothing.
func (st *State[T]) Ledger() *ledger.Entry {
	if st == nil {
		return nil
	}
	return &st.entry
}

// Told returns what was told of the policy; nil on a nil state.
func (st *State[T]) Told() *report.Told {
	if st == nil {
		return nil
	}
	return &st.told
}
