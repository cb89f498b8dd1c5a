package reconcile

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// evaluations remembers, for one compiled policy, what its program gave
// for each trigger, keyed by the resourceVersions of everything the
// evaluation was given: a sync re-evaluates only the triggers that changed.
// Only reproducible results are kept (celenv.Result.Reproducible): one
// that read another object or the clock is evaluated every time.
//
// A sync's lookups and stores form a round; ending it drops the triggers
// the round did not see, so the memory follows the triggers that exist.
// The objects kept are shared by the syncs that reuse them: no phase after
// evaluation may change them.
type evaluations struct {
	mu         sync.Mutex
	last, next map[types.UID]evaluation
}

// evaluation is one kept result.
type evaluation struct {
	inputs  string
	objects []*unstructured.Unstructured
	matched bool
}

func newEvaluations() *evaluations {
	return &evaluations{last: map[types.UID]evaluation{}, next: map[types.UID]evaluation{}}
}

// get returns the result kept for the trigger when it was computed from
// the same inputs, and keeps it for the next round.
func (e *evaluations) get(uid types.UID, inputs string) (evaluation, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev, ok := e.last[uid]
	if !ok || ev.inputs != inputs {
		return evaluation{}, false
	}
	e.next[uid] = ev
	return ev, true
}

// put keeps a result for the next round.
func (e *evaluations) put(uid types.UID, ev evaluation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next[uid] = ev
}

// endRound forgets every trigger the round neither looked up with the
// same inputs nor stored.
func (e *evaluations) endRound() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last, e.next = e.next, make(map[types.UID]evaluation, len(e.next))
}
