package reconcile

import (
	"sync"
	"sync/atomic"

	"github.com/sprout-gitops/sprout/reconcile/access"
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
	// rebuilding: the record is being rebuilt from the objects.
	rebuilding bool
	// progressed is the generation last marked Reconciling.
	progressed int64
	// told is the summary of the last outcome written to the status.
	told *string
	// failure is the failure last told in an Event ("reason: message").
	failure *string
	// selfTriggers is how many of its own objects the last sync passed
	// over as triggers.
	selfTriggers int
	// verdict is the RBACPermissionsGranted verdict the last sync
	// reported; roles, the roles its bindings referred to.
	verdict *grantVerdict
	roles   access.RoleRefs
	// status is the status last written, until the cache holds it.
	status writtenStatus

	// downstreamEpoch counts the updates and deletions the downstream
	// informers delivered of the policy's objects (settledAt).
	downstreamEpoch atomic.Uint64
}

// states holds the state of every policy this replica runs.
type states struct {
	mu sync.RWMutex
	m  map[policyKey]*policyState
}

// enter returns the state of key, made if the policy had none.
func (s *states) enter(key policyKey) *policyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[key]; ok {
		return st
	}
	if s.m == nil {
		s.m = map[policyKey]*policyState{}
	}
	st := &policyState{}
	s.m[key] = st
	return st
}

// of returns the state of key; a policy that is not running has none, and
// every method of a nil state keeps nothing and answers the zero value.
func (s *states) of(key policyKey) *policyState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[key]
}

// drop forgets key's state.
func (s *states) drop(key policyKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// each calls f with every state.
func (s *states) each(f func(policyKey, *policyState)) {
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

// rebuild marks, or unmarks, the record as being rebuilt.
func (st *policyState) rebuild(on bool) { st.with(func(st *policyState) { st.rebuilding = on }) }

// rebuildPending reports whether the record is being rebuilt.
func (st *policyState) rebuildPending() (on bool) {
	st.with(func(st *policyState) { on = st.rebuilding })
	return on
}

// progress records gen as marked Reconciling and reports whether it was
// not already.
func (st *policyState) progress(gen int64) (first bool) {
	st.with(func(st *policyState) { first, st.progressed = st.progressed != gen, gen })
	return first
}

// tell records the summary of the outcome written and returns the one
// written before, if any.
func (st *policyState) tell(summary string) (before *string) {
	st.with(func(st *policyState) { before, st.told = st.told, &summary })
	return before
}

// lastTold returns the summary of the outcome last written, if any.
func (st *policyState) lastTold() (told *string) {
	st.with(func(st *policyState) { told = st.told })
	return told
}

// fail records failure ("" for none) and returns the failure told before,
// if any.
func (st *policyState) fail(failure string) (before *string) {
	st.with(func(st *policyState) { before, st.failure = st.failure, &failure })
	return before
}

// passedOver records n of its own objects passed over and reports whether
// it differs from the last count.
func (st *policyState) passedOver(n int) (changed bool) {
	st.with(func(st *policyState) { changed, st.selfTriggers = st.selfTriggers != n, n })
	return changed
}

// granted keeps the verdict a sync reported.
func (st *policyState) granted(v *grantVerdict) { st.with(func(st *policyState) { st.verdict = v }) }

// reported returns the verdict last reported, or nil.
func (st *policyState) reported() (v *grantVerdict) {
	st.with(func(st *policyState) { v = st.verdict })
	return v
}

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
