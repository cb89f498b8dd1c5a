package policy

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

// Evaluations remembers, for one compiled policy, what a sync works out
// for each cached trigger object: the metadata it reads, whether the match
// constraints select it, and what the program generates for it. An
// informer cache never changes an object, it replaces it, so the same
// object is the same resourceVersion: what was worked out for it holds
// while it, its Namespace and its state before its last UPDATE are the
// same objects, and a sync works out again only what changed. (A re-list
// replaces every object: the next sync works everything out again, which
// is correct, only slower.) Only reproducible Evaluations are kept
// (celenv.Result.Reproducible): one that read another object or the clock
// is evaluated every time.
//
// A sync's lookups form a round; ending it drops the objects the round did
// not see, so the memory follows the triggers that exist. The generated
// objects kept are shared by the syncs that reuse them: no phase after
// Evaluation may change them.
type Evaluations struct {
	mu         sync.Mutex
	last, next map[*cluster.Object]*Memo
}

// Memo is what is known of one cached trigger object. Only the
// policy's sync, one at a time, reads and writes its fields.
type Memo struct {
	UID       types.UID
	Namespace string
	Created   time.Time
	Deleting  bool

	// selected is the match constraints' answer, known when MatchKnown,
	// for the Namespace object matchNamespace.
	MatchKnown     bool
	Selected       bool
	MatchNamespace *corev1.Namespace
	// Self: not selected because the policy generated the object.
	Self bool

	// Evaluated is the kept Evaluation, or nil.
	Evaluated *Evaluation
}

// Evaluation is one program result and the other inputs it had.
type Evaluation struct {
	Old       *cluster.Object
	Namespace *corev1.Namespace
	Op        admission.Operation
	// Objects are what the program generated, until they settle: then
	// settled stands for them (reconcile's settle).
	Objects []*unstructured.Unstructured
	Settled inventory.Settled
	// SettledAt is the policy's downstream event count (downstreamEvents)
	// when settled last held: while it is the same, it holds still, unless
	// awaiting says that an object created was not cached then (no event
	// tells when it is, so only a lookup does).
	SettledAt uint64
	Awaiting  bool
	// Kinds are the objects' Kinds, read once.
	Kinds   []schema.GroupVersionKind
	Matched bool
	// Exceptions are those the Evaluation was made under; excepted, those
	// of them that skipped the trigger, and exceptedResult how it is
	// reported; audit are the policy's auditAnnotations evaluated.
	Exceptions     *Exceptions
	Excepted       []string
	ExceptedResult string
	Audit          map[string]string
}

func NewEvaluations() *Evaluations {
	return &Evaluations{last: map[*cluster.Object]*Memo{}, next: map[*cluster.Object]*Memo{}}
}

// Of returns what is known Of the cached trigger object u, and keeps it
// for the next round.
func (e *Evaluations) Of(u *cluster.Object) *Memo {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.last[u]
	if m == nil {
		m = e.next[u] // seen earlier in this round
	}
	if m == nil {
		m = &Memo{UID: u.GetUID(), Namespace: u.GetNamespace(), Created: u.Created(), Deleting: u.Deleting()}
	}
	e.next[u] = m
	return m
}

// Seen counts the objects the round under way has seen so far: a full
// sync's match looks at every cached trigger in it.
func (e *Evaluations) Seen() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.next)
}

// EndRound forgets every object the round did not see.
func (e *Evaluations) EndRound() {
	e.mu.Lock()
	defer e.mu.Unlock()
	// The last round's map is cleared for the next rather than a new one
	// made: a sync per event would otherwise allocate one the size of
	// the policy's triggers each time.
	e.last, e.next = e.next, e.last
	clear(e.next)
}

// Keep returns what is known of the cached trigger object u for an
// incremental sync, which opens no round: u is kept as the last round's.
func (e *Evaluations) Keep(u *cluster.Object) *Memo {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.last[u]
	if m == nil {
		m = &Memo{UID: u.GetUID(), Namespace: u.GetNamespace(), Created: u.Created(), Deleting: u.Deleting()}
		e.last[u] = m
	}
	return m
}

// Forget drops what is known of a cached object an event replaced or
// deleted; a full sync's round would not see it again.
func (e *Evaluations) Forget(u *cluster.Object) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.last, u)
}
