package state

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Contribution is what one trigger, evaluated cleanly, adds to its
// policy's counts, and where to find it again.
type Contribution struct {
	UID     types.UID
	GVR     schema.GroupVersionResource
	Key     string
	Objects int
	Matched bool
	// Volatile: its evaluation read the clock or the web, which no event
	// announces.
	Volatile bool
	// Settled counts its objects settled once its sync ended (settle),
	// read from Memo, which is then let go.
	Settled int
	Memo    *policy.Memo
}

// settle reads, once the applies of its sync ended, how many of the
// trigger's objects its kept evaluation holds settled.
func (c *Contribution) settle() {
	if c.Memo != nil && c.Memo.Evaluated != nil {
		c.Settled = c.Memo.Evaluated.Settled.Len()
	}
	c.Memo = nil
}

// Tally is the incremental sync's memory of a policy: per trigger, what the policy's last syncs found, kept while
// every one of them was clean: no error, no failed trigger, no refusal.
type Tally struct {
	// Evaluations and Triggers identify the compiled policy it holds for.
	Evaluations *policy.Evaluations
	Triggers    []schema.GroupVersionResource
	ByUID       map[types.UID]Counted
	Matched     int
	Objects     int
	Settled     int
	Volatile    int
	// Since counts the triggers synced incrementally since the last full
	// sync.
	Since int
}

// Counted is what a Tally keeps of a trigger's Contribution: one per
// trigger the policy matches, so no more than the counts and where to find
// the trigger again.
type Counted struct {
	Key              string
	Objects, Settled int32
	// GVR indexes the Tally's triggers.
	GVR               int32
	Matched, Volatile bool
}

// NewTally tallies the contributions of a clean full sync of cp.
func NewTally(cp *policy.Compiled, cs []Contribution) *Tally {
	t := &Tally{Evaluations: cp.Evaluations, Triggers: cp.Triggers, ByUID: make(map[types.UID]Counted, len(cs))}
	for _, c := range cs {
		t.Add(c)
	}
	return t
}

// Add counts c, in place of what the trigger contributed before.
func (t *Tally) Add(c Contribution) {
	t.Remove(c.UID)
	c.settle()
	t.ByUID[c.UID] = Counted{Key: c.Key, Objects: int32(c.Objects), Settled: int32(c.Settled),
		GVR: int32(slices.Index(t.Triggers, c.GVR)), Matched: c.Matched, Volatile: c.Volatile}
	t.Objects += c.Objects
	t.Settled += c.Settled
	if c.Matched {
		t.Matched++
	}
	if c.Volatile {
		t.Volatile++
	}
}

// Remove forgets what the trigger uid contributed.
func (t *Tally) Remove(uid types.UID) {
	c, ok := t.ByUID[uid]
	if !ok {
		return
	}
	delete(t.ByUID, uid)
	t.Objects -= int(c.Objects)
	t.Settled -= int(c.Settled)
	if c.Matched {
		t.Matched--
	}
	if c.Volatile {
		t.Volatile--
	}
}
