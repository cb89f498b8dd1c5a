package reconcile

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

// policyState is what this replica keeps of one policy between its syncs,
// beside its compiled generation: it enters with the policy (states.enter,
// from the handler) and is dropped in one place when the policy leaves
// (Controller.forgetPolicy: deleted and cleaned up after, released to
// another shard, or its source gone). A sync that ends after its policy
// left finds no state and keeps nothing.
type policyState struct {
	mu sync.Mutex
	// tally is what the last clean full sync found per trigger, for the
	// incremental syncs after it; nil: the next sync is a full one.
	tally *tally
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

// states holds the state of every policy this replica runs.
type states struct {
	mu sync.RWMutex
	m  map[policy.Key]*policyState
}

// enter returns the state of key, made if the policy had none.
func (s *states) enter(key policy.Key) *policyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[key]; ok {
		return st
	}
	if s.m == nil {
		s.m = map[policy.Key]*policyState{}
	}
	st := &policyState{}
	s.m[key] = st
	return st
}

// of returns the state of key; a policy that is not running has none, and
// every method of a nil state keeps nothing and answers the zero value.
func (s *states) of(key policy.Key) *policyState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[key]
}

// drop forgets key's state.
func (s *states) drop(key policy.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// each calls f with every state.
func (s *states) each(f func(policy.Key, *policyState)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, st := range s.m {
		f(k, st)
	}
}

// len counts the states kept.
func (s *states) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// with runs f under the state's lock; on a nil state, not at all.
func (st *policyState) with(f func(*policyState)) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	f(st)
}

// getTally returns the tally kept, or nil.
func (st *policyState) getTally() (t *tally) {
	st.with(func(st *policyState) { t = st.tally })
	return t
}

// setTally keeps t; nil forgets it, and the next sync is a full one.
func (st *policyState) setTally(t *tally) { st.with(func(st *policyState) { st.tally = t }) }

// waited counts a sync that waited for a cache, and returns how many in a
// row did; done resets the count.
func (st *policyState) waited() (n int) {
	st.with(func(st *policyState) { st.waits++; n = st.waits })
	return n
}

func (st *policyState) done() { st.with(func(st *policyState) { st.waits = 0 }) }

// bound keeps the roles the policy's bindings referred to in a sync. A
// sync that stopped before judging every binding only adds to them.
func (st *policyState) bound(refs access.RoleRefs, complete bool) {
	st.with(func(st *policyState) {
		if complete || st.roles.Names == nil {
			st.roles = refs
			return
		}
		st.roles = st.roles.Merge(refs)
	})
}

// boundTo reports whether the policy's bindings referred to role, or to
// an aggregated ClusterRole that a ClusterRole may join.
func (st *policyState) boundTo(role string, clusterRole bool) (yes bool) {
	st.with(func(st *policyState) { yes = st.roles.Names != nil && st.roles.Has(role, clusterRole) })
	return yes
}

// downstreamChanged counts an update or deletion of one of the policy's
// objects.
func (st *policyState) downstreamChanged() {
	if st != nil {
		st.downstreamEpoch.Add(1)
	}
}

// epoch is the count of downstream changes now.
func (st *policyState) epoch() uint64 {
	if st == nil {
		return 0
	}
	return st.downstreamEpoch.Load()
}

// reads returns the resources the policy's syncs read; nil for none.
func (st *policyState) reads() sets.Set[schema.GroupVersionResource] {
	if st == nil {
		return nil
	}
	if p := st.readResources.Load(); p != nil {
		return *p
	}
	return nil
}

// readsFrom reports whether the policy's syncs read gvr.
func (st *policyState) readsFrom(gvr schema.GroupVersionResource) bool { return st.reads().Has(gvr) }

// setReads records what a full sync read: it replaces what was recorded.
// add, what an incremental one read: it adds to it.
func (st *policyState) setReads(resources sets.Set[schema.GroupVersionResource], entries sets.Set[string], add bool) {
	st.with(func(st *policyState) {
		if add {
			resources = st.reads().Union(resources)
			if p := st.readEntries.Load(); p != nil {
				entries = p.Union(entries)
			}
		}
		st.readResources.Store(&resources)
		st.readEntries.Store(&entries)
	})
}

// forgetReads forgets what the policy's syncs read.
func (st *policyState) forgetReads() { st.setReads(nil, nil, false) }

// readsEntry reports whether the policy's syncs read GlobalContextEntry
// name.
func (st *policyState) readsEntry(name string) bool {
	if st == nil {
		return false
	}
	p := st.readEntries.Load()
	return p != nil && p.Has(name)
}

// keptExceptions returns what the policy keeps of its exceptions; nil for
// a policy that is not running.
func (st *policyState) keptExceptions() *evaluate.PolicyExceptions {
	if st == nil {
		return nil
	}
	return &st.exceptions
}

// addTombstone keeps a deleted trigger's last state.
func (st *policyState) addTombstone(tr policy.Trigger) {
	st.with(func(st *policyState) {
		if st.tombstones == nil {
			st.tombstones = map[types.UID]policy.Trigger{}
		}
		st.tombstones[tr.Object.GetUID()] = tr
	})
}

// pendingTombstones returns the deleted triggers not generated from yet.
func (st *policyState) pendingTombstones() (out []policy.Trigger) {
	st.with(func(st *policyState) {
		for _, tr := range st.tombstones {
			out = append(out, tr)
		}
	})
	return out
}

// tombstoned returns the UIDs of the deleted triggers not generated from
// yet.
func (st *policyState) tombstoned() sets.Set[string] {
	pending := sets.New[string]()
	for _, t := range st.pendingTombstones() {
		pending.Insert(string(t.Object.GetUID()))
	}
	return pending
}

// tombstonesDone forgets the tombstones generated from.
func (st *policyState) tombstonesDone(trs []policy.Trigger) {
	st.with(func(st *policyState) {
		for _, tr := range trs {
			delete(st.tombstones, tr.Object.GetUID())
		}
	})
}

// forgetEvents forgets what events taught about the policy: the triggers
// they admitted and the tombstones they left. A policy that stops running
// and comes back under the same name is another: what it admits, its
// record says.
func (st *policyState) forgetEvents() {
	st.ledger().ForgetAdmissions()
	st.with(func(st *policyState) { st.tombstones = nil })
}

// ledger is the ledger's entry of the policy; nil when the policy does
// not run, which keeps nothing.
func (st *policyState) ledger() *ledger.Entry {
	if st == nil {
		return nil
	}
	return &st.entry
}

// telling returns what was told of the policy; nil on a nil state.
func (st *policyState) telling() *report.Told {
	if st == nil {
		return nil
	}
	return &st.told
}
