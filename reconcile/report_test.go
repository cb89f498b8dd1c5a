package reconcile_test

import (
	"context"
	"fmt"
	"testing"
)

// TestStatusWritesCoalesce: triggers arriving one after another cost a
// sync each (or fewer) but far fewer status writes: an outcome that only
// changes the counts waits a little for the next. The status still ends with the last
// counts, and a restart has nothing left to write.
func TestStatusWritesCoalesce(t *testing.T) {
	tb := newTable(t, "coalesce")
	tb.applyPolicy(derivedPolicy("coalesce", "coalesce", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("coalesce") })

	counter, syncs, c, stop := runCountingController(t, "GeneratingPolicy/coalesce", nil)

	const triggers = 20
	for i := range triggers {
		name := fmt.Sprintf("t%02d", i)
		tb.trigger(name, "coalesce", name)
		tb.waitFor("its downstream", name+"-out", exists)
	}
	// Stopped once the last trigger's sync has ended (its object exists
	// before its outcome is handed over), and at once: the counts not yet
	// written are written on the way out.
	poll(t, "the syncs ended", func(context.Context) (bool, error) { return c.SyncsIdle(), nil })
	stop()
	want := fmt.Sprintf("%d triggers, %d objects", triggers, triggers)
	if c, err := policyCondition(context.Background(), "coalesce"); err != nil || c == nil || c.Message != want {
		t.Errorf("status after the controller stopped: %v (error %v), want %q", c, err, want)
	}
	statusWrites := len(counter.about("generatingpolicies/coalesce/status"))
	// A sync may take a trigger that arrived while it ran, so there may
	// be fewer syncs than triggers: the writes are counted against both.
	if n := syncs.Load(); statusWrites*2 > triggers || statusWrites*2 > int(n) {
		t.Errorf("%d triggers took %d syncs and %d status writes: want at most half as many writes as either", triggers, n, statusWrites)
	}

	again, restarted := countingWrites(cfg)
	runUntilSynced(t, again, "GeneratingPolicy/coalesce")
	if w := restarted.about("coalesce"); len(w) != 0 {
		t.Errorf("a restart wrote %v: the last outcome was not written before the controller stopped", w)
	}
}
