// Package state is what the reconcile core keeps of each policy between
// its syncs: one State per policy, made when the policy enters and dropped
// in one place when it leaves (States.Enter, States.Drop, both the core's
// calls). A State holds the parts' own per-policy values (the ledger's
// entry, what was told of the policy, its PolicyExceptions), its
// tombstones, what its syncs read, and the incremental sync's Tally of
// what the policy's triggers contributed. Every
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
// beside its compiled generation.
type State struct {
	mu sync.Mutex
	// tally is what the last clean full sync found per trigger, for the
	// incremental syncs after it; nil: the next sync is a full one.
	tally *Tally
	// waits counts the syncs in a row that had to wait for a cache;
	// waiting: the last one did, and none has begun since (Waiting).
	waits   int
	waiting bool
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
	// reapply are the triggers an UPDATE event selected since the last
	// sync, whose objects a policy with useServerSideApply but without
	// synchronize applies again.
	reapply sets.Set[types.UID]

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
type States struct {
	mu sync.RWMutex
	m  map[policy.Key]*State
}

// Enter returns the state of key, made if the policy had none.
func (s *States) Enter(key policy.Key) *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[key]; ok {
		return st
	}
	if s.m == nil {
		s.m = map[policy.Key]*State{}
	}
	st := &State{}
	s.m[key] = st
	return st
}

// Of returns the state Of key; a policy that is not running has none, and
// every method Of a nil state keeps nothing and answers the zero value.
func (s *States) Of(key policy.Key) *State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[key]
}

// Drop forgets key's state.
func (s *States) Drop(key policy.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// Each calls f with every state.
func (s *States) Each(f func(policy.Key, *State)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, st := range s.m {
		f(k, st)
	}
}

// Len counts the states kept.
func (s *States) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// with runs f under the state's lock; on a nil state, not at all.
func (st *State) with(f func(*State)) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	f(st)
}

// Tally returns the tally kept, or nil.
func (st *State) Tally() (t *Tally) {
	st.with(func(st *State) { t = st.tally })
	return t
}

// SetTally keeps t; nil forgets it, and the next sync is a full one.
func (st *State) SetTally(t *Tally) { st.with(func(st *State) { st.tally = t }) }

// Waited counts a sync that waited for a cache, and returns how many in a
// row did; Done resets the count.
func (st *State) Waited() (n int) {
	st.with(func(st *State) { st.waits++; n = st.waits; st.waiting = true })
	return n
}

func (st *State) Done() { st.with(func(st *State) { st.waits, st.waiting = 0, false }) }

// Begin says a sync of the policy begins: what it would wait for, it
// looks at itself.
func (st *State) Begin() { st.with(func(st *State) { st.waiting = false }) }

// Waiting reports whether the policy's last sync waited for a cache and
// no sync has begun since: a cache that syncs should wake it rather than
// leave it to its back-off.
func (st *State) Waiting() (yes bool) {
	st.with(func(st *State) { yes = st.waiting })
	return yes
}

// Bound keeps the roles the policy's bindings referred to in a sync. A
// sync that stopped before judging every binding only adds to them.
func (st *State) Bound(refs access.RoleRefs, complete bool) {
	st.with(func(st *State) {
		if complete || st.roles.Names == nil {
			st.roles = refs
			return
		}
		st.roles = st.roles.Merge(refs)
	})
}

// BoundTo reports whether the policy's bindings referred to role, or to
// an aggregated ClusterRole that a ClusterRole may join.
func (st *State) BoundTo(role string, clusterRole bool) (yes bool) {
	st.with(func(st *State) { yes = st.roles.Names != nil && st.roles.Has(role, clusterRole) })
	return yes
}

// JudgedHeld reports whether the policy's last syncs judged what its
// identity holds (access.RoleRefs.Held): an RBAC change may change their
// verdicts.
func (st *State) JudgedHeld() (yes bool) {
	st.with(func(st *State) { yes = st.roles.Held })
	return yes
}

// DownstreamChanged counts an update or deletion of one of the policy's
// objects.
func (st *State) DownstreamChanged() {
	if st != nil {
		st.downstreamEpoch.Add(1)
	}
}

// Epoch is the count of downstream changes now.
func (st *State) Epoch() uint64 {
	if st == nil {
		return 0
	}
	return st.downstreamEpoch.Load()
}

// Reads returns the resources the policy's syncs read; nil for none.
func (st *State) Reads() sets.Set[schema.GroupVersionResource] {
	if st == nil {
		return nil
	}
	if p := st.readResources.Load(); p != nil {
		return *p
	}
	return nil
}

// ReadsFrom reports whether the policy's syncs read gvr.
func (st *State) ReadsFrom(gvr schema.GroupVersionResource) bool { return st.Reads().Has(gvr) }

// SetReads records what a full sync read: it replaces what was recorded.
// add, what an incremental one read: it adds to it.
func (st *State) SetReads(resources sets.Set[schema.GroupVersionResource], entries sets.Set[string], add bool) {
	st.with(func(st *State) {
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
func (st *State) ForgetReads() { st.SetReads(nil, nil, false) }

// ReadsEntry reports whether the policy's syncs read GlobalContextEntry
// name.
func (st *State) ReadsEntry(name string) bool {
	if st == nil {
		return false
	}
	p := st.readEntries.Load()
	return p != nil && p.Has(name)
}

// Exceptions returns what the policy keeps of its exceptions; nil for
// a policy that is not running.
func (st *State) Exceptions() *evaluate.PolicyExceptions {
	if st == nil {
		return nil
	}
	return &st.exceptions
}

// AddTombstone keeps a deleted trigger's last state.
func (st *State) AddTombstone(tr policy.Trigger) {
	st.with(func(st *State) {
		if st.tombstones == nil {
			st.tombstones = map[types.UID]policy.Trigger{}
		}
		st.tombstones[tr.Object.GetUID()] = tr
	})
}

// PendingTombstones returns the deleted triggers not generated from yet.
func (st *State) PendingTombstones() (out []policy.Trigger) {
	st.with(func(st *State) {
		for _, tr := range st.tombstones {
			out = append(out, tr)
		}
	})
	return out
}

// Tombstoned returns the UIDs of the deleted triggers not generated from
// yet.
func (st *State) Tombstoned() sets.Set[string] {
	pending := sets.New[string]()
	for _, t := range st.PendingTombstones() {
		pending.Insert(string(t.Object.GetUID()))
	}
	return pending
}

// TombstonesDone forgets the tombstones generated from.
func (st *State) TombstonesDone(trs []policy.Trigger) {
	st.with(func(st *State) {
		for _, tr := range trs {
			delete(st.tombstones, tr.Object.GetUID())
		}
	})
}

// Updated notes that an UPDATE event of the policy's rules selected
// trigger uid: its objects are applied again at the next sync.
func (st *State) Updated(uid types.UID) {
	st.with(func(st *State) {
		if st.reapply == nil {
			st.reapply = sets.New[types.UID]()
		}
		st.reapply.Insert(uid)
	})
}

// TakeUpdated returns, and forgets, the triggers (by UID) an UPDATE
// selected since they were last taken: a sync takes them all, as it
// evaluates every trigger changed since the last.
func (st *State) TakeUpdated() (out sets.Set[types.UID]) {
	st.with(func(st *State) { out, st.reapply = st.reapply, nil })
	return out
}

// ForgetEvents forgets what events taught about the policy: the triggers
// they admitted and the tombstones they left. A policy that stops running
// and comes back under the same name is another: what it admits, its
// record says.
func (st *State) ForgetEvents() {
	st.Ledger().ForgetAdmissions()
	st.with(func(st *State) { st.tombstones, st.reapply = nil, nil })
}

// Ledger is the Ledger's entry of the policy; nil when the policy does
// not run, which keeps nothing.
func (st *State) Ledger() *ledger.Entry {
	if st == nil {
		return nil
	}
	return &st.entry
}

// Told returns what was told of the policy; nil on a nil state.
func (st *State) Told() *report.Told {
	if st == nil {
		return nil
	}
	return &st.told
}
