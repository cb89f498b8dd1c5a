package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// PolicyReports are written between syncs: a report write waits while a
// sync is under way, until the last one ends, or at most its longest.
func TestReportsWaitForTheSyncsUnderWay(t *testing.T) {
	ctx := context.Background()
	var s syncs
	s.quiet(ctx, time.Hour) // none under way: returns at once

	a, b := policy.Key{Kind: "GeneratingPolicy", Name: "a"}, policy.Key{Kind: "GeneratingPolicy", Name: "b"}
	s.started(a, func() {})
	const longest = 50 * time.Millisecond
	begun := time.Now()
	s.quiet(ctx, longest)
	if waited := time.Since(begun); waited < longest {
		t.Errorf("with a sync under way, a report waited %s, want %s", waited, longest)
	}

	s.started(b, func() {})
	done := make(chan struct{})
	go func() {
		s.quiet(ctx, time.Hour)
		close(done)
	}()
	s.ended(a)
	s.ended(a) // ended twice: nothing more
	select {
	case <-done:
		t.Fatal("a report went on while b's sync was under way")
	default:
	}
	s.ended(b)
	<-done // the last sync ended: the report goes on (a hang fails the test)
	s.quiet(ctx, time.Hour)
}
