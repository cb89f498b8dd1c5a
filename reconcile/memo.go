package reconcile

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/inventory"
)

// evaluations remembers, for one compiled policy, what a sync works out
// for each cached trigger object: the metadata it reads, whether the match
// constraints select it, and what the program generates for it. An
// informer cache never changes an object, it replaces it, so the same
// object is the same resourceVersion: what was worked out for it holds
// while it, its Namespace and its state before its last UPDATE are the
// same objects, and a sync works out again only what changed. (A re-list
// replaces every object: the next sync works everything out again, which
// is correct, only slower.) Only reproducible evaluations are kept
// (celenv.Result.Reproducible): one that read another object or the clock
// is evaluated every time.
//
// A sync's lookups form a round; ending it drops the objects the round did
// not see, so the memory follows the triggers that exist. The generated
// objects kept are shared by the syncs that reuse them: no phase after
// evaluation may change them.
type evaluations struct {
	mu         sync.Mutex
	last, next map[*cluster.Object]*triggerMemo
}

// triggerMemo is what is known of one cached trigger object. Only the
// policy's sync, one at a time, reads and writes its fields.
type triggerMemo struct {
	uid       types.UID
	namespace string
	created   time.Time
	deleting  bool

	// selected is the match constraints' answer, known when matchKnown,
	// for the Namespace object matchNamespace.
	matchKnown     bool
	selected       bool
	matchNamespace *corev1.Namespace
	// self: not selected because the policy generated the object.
	self bool

	// evaluated is the kept evaluation, or nil.
	evaluated *evaluation
}

// evaluation is one program result and the other inputs it had.
type evaluation struct {
	old       *cluster.Object
	namespace *corev1.Namespace
	op        admission.Operation
	// objects are what the program generated, until they settle: then
	// settled stands for them (Controller.settle).
	objects []*unstructured.Unstructured
	settled inventory.Settled
	// settledAt is the policy's downstream event count (downstreamEvents)
	// when settled last held: while it is the same, it holds still, unless
	// awaiting says that an object created was not cached then (no event
	// tells when it is, so only a lookup does).
	settledAt uint64
	awaiting  bool
	// kinds are the objects' kinds, read once.
	kinds   []schema.GroupVersionKind
	matched bool
	// exceptions are those the evaluation was made under; excepted, those
	// of them that skipped the trigger, and exceptedResult how it is
	// reported; audit are the policy's auditAnnotations evaluated.
	exceptions     *exceptionSet
	excepted       []string
	exceptedResult string
	audit          map[string]string
}

func newEvaluations() *evaluations {
	return &evaluations{last: map[*cluster.Object]*triggerMemo{}, next: map[*cluster.Object]*triggerMemo{}}
}

// of returns what is known of the cached trigger object u, and keeps it
// for the next round.
func (e *evaluations) of(u *cluster.Object) *triggerMemo {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.last[u]
	if m == nil {
		m = e.next[u] // seen earlier in this round
	}
	if m == nil {
		m = &triggerMemo{uid: u.GetUID(), namespace: u.GetNamespace(), created: u.Created(), deleting: u.Deleting()}
	}
	e.next[u] = m
	return m
}

// endRound forgets every object the round did not see.
func (e *evaluations) endRound() {
	e.mu.Lock()
	defer e.mu.Unlock()
	// The last round's map is cleared for the next rather than a new one
	// made: a sync per event would otherwise allocate one the size of
	// the policy's triggers each time.
	e.last, e.next = e.next, e.last
	clear(e.next)
}

// keep returns what is known of the cached trigger object u for an
// incremental sync, which opens no round: u is kept as the last round's.
func (e *evaluations) keep(u *cluster.Object) *triggerMemo {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.last[u]
	if m == nil {
		m = &triggerMemo{uid: u.GetUID(), namespace: u.GetNamespace(), created: u.Created(), deleting: u.Deleting()}
		e.last[u] = m
	}
	return m
}

// forget drops what is known of a cached object an event replaced or
// deleted; a full sync's round would not see it again.
func (e *evaluations) forget(u *cluster.Object) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.last, u)
}
