package queue

import (
	"context"
	"testing"
	"time"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// PolicyReports are read and written between syncs: Quiet waits while a
// sync is under way, until the last one ends, or at most its longest; and
// before the first sync, until the first ones end, so that a start's
// lists go first.
func TestQuietWaitsForTheSyncsUnderWay(t *testing.T) {
	ctx := context.Background()
	var r Running
	a, b := policy.Key{Kind: "GeneratingPolicy", Name: "a"}, policy.Key{Kind: "GeneratingPolicy", Name: "b"}
	first := make(chan struct{})
	go func() {
		r.Quiet(ctx, time.Hour)
		close(first)
	}()
	r.Started(a, func() {})
	select {
	case <-first:
		t.Fatal("before the first sync, a report went on at once")
	default:
	}
	r.Ended(a)
	// The first sync ended: the report goes on (a hang fails the test);
	// with none under way, at once.
	<-first
	r.Quiet(ctx, time.Hour)

	r.Started(a, func() {})
	const longest = 50 * time.Millisecond
	begun := time.Now()
	r.Quiet(ctx, longest)
	if waited := time.Since(begun); waited < longest {
		t.Errorf("with a sync under way, a report waited %s, want %s", waited, longest)
	}

	r.Started(b, func() {})
	done := make(chan struct{})
	go func() {
		r.Quiet(ctx, time.Hour)
		close(done)
	}()
	r.Ended(a)
	r.Ended(a) // ended twice: nothing more
	select {
	case <-done:
		t.Fatal("a report went on while b's sync was under way")
	default:
	}
	if r.Len() != 1 {
		t.Errorf("%d syncs under way, want 1", r.Len())
	}
	r.Ended(b)
	<-done
	r.Quiet(ctx, time.Hour)
}

// Stop cancels the sync under way of the policy named, and no other.
func TestStopCancelsTheSyncOfThePolicy(t *testing.T) {
	var r Running
	a, b := policy.Key{Kind: "GeneratingPolicy", Name: "a"}, policy.Key{Kind: "GeneratingPolicy", Name: "b"}
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	r.Started(a, cancelA)
	r.Started(b, cancelB)
	r.Stop(a)
	r.Stop(policy.Key{Kind: "GeneratingPolicy", Name: "none"})
	if ctxA.Err() == nil || ctxB.Err() != nil {
		t.Errorf("after Stop(a): a's context %v, b's %v; want a cancelled only", ctxA.Err(), ctxB.Err())
	}
}
