package procs

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestNextFollowsTheLoadWithHysteresis(t *testing.T) {
	for _, c := range []struct {
		current, max int
		busy         float64
		want         int
	}{
		{current: 2, max: 2, busy: 0.1, want: 1},  // a steady trickle of events
		{current: 2, max: 2, busy: 0.49, want: 1}, // under lowerAt
		{current: 2, max: 2, busy: 0.6, want: 2},  // between: kept
		{current: 1, max: 2, busy: 0.6, want: 1},  // between: kept
		{current: 1, max: 2, busy: 0.71, want: 2}, // one processor has work waiting
		{current: 1, max: 8, busy: 0.9, want: 8},  // all of them at once
		{current: 8, max: 8, busy: 4.0, want: 8},
		{current: 8, max: 8, busy: 0.2, want: 1},
		{current: 1, max: 1, busy: 1.0, want: 1}, // nothing to raise to
	} {
		if got := Next(c.current, c.max, c.busy); got != c.want {
			t.Errorf("Next(%d of %d, busy %.2f) = %d, want %d", c.current, c.max, c.busy, got, c.want)
		}
	}
}

// TestGovernorStepsByTheCPUOfEachInterval runs a governor over a made-up
// process: idle, then one processor's worth of work, then idle again.
func TestGovernorStepsByTheCPUOfEachInterval(t *testing.T) {
	var used time.Duration
	var set []int
	g := &Governor{Max: 4, Used: func() time.Duration { return used }, Set: func(n int) { set = append(set, n) }}
	at := time.Unix(0, 0)
	g.Begin(at)
	step := func(cpu time.Duration) int {
		used += cpu
		at = at.Add(interval)
		return g.Step(at)
	}
	if n := step(interval / 20); n != 1 {
		t.Fatalf("idle: %d processors, want 1", n)
	}
	if n := step(interval / 2); n != 1 {
		t.Fatalf("half a processor busy on one: %d processors, want 1 (between the thresholds)", n)
	}
	if n := step(interval * 9 / 10); n != 4 {
		t.Fatalf("one processor 90%% busy: %d processors, want 4", n)
	}
	if n := step(interval); n != 4 {
		t.Fatalf("one processor's worth on four: %d processors, want 4", n)
	}
	if n := step(interval / 10); n != 1 {
		t.Fatalf("idle again: %d processors, want 1", n)
	}
	if want := []int{1, 4, 1}; len(set) != len(want) || set[0] != 1 || set[1] != 4 || set[2] != 1 {
		t.Fatalf("set %v, want %v: only changes are set", set, want)
	}
}

// TestFollowRunsAnIdleProcessOnOneProcessor runs Follow in this test
// process, which is idle, and waits for the runtime's GOMAXPROCS to drop
// to one; when Follow ends, the default is back.
func TestFollowRunsAnIdleProcessOnOneProcessor(t *testing.T) {
	max := runtime.GOMAXPROCS(0)
	if max < 2 {
		t.Skip("the runtime's default is one processor: nothing to follow")
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set: Follow keeps it")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Follow(ctx, nil) }()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.GOMAXPROCS(0) != 1 {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("GOMAXPROCS still %d after 30 s of an idle process", runtime.GOMAXPROCS(0))
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // polling a condition, not ordering goroutines
	}
	cancel()
	<-done
	if n := runtime.GOMAXPROCS(0); n != max {
		t.Fatalf("GOMAXPROCS %d after Follow ended, want the default %d", n, max)
	}
}

// TestFollowKeepsAnExplicitGOMAXPROCS: a GOMAXPROCS in the environment is
// the operator's choice, which Follow leaves as it is and returns at once.
func TestFollowKeepsAnExplicitGOMAXPROCS(t *testing.T) {
	t.Setenv("GOMAXPROCS", "2")
	before := runtime.GOMAXPROCS(0)
	done := make(chan struct{})
	go func() { defer close(done); Follow(t.Context(), nil) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Follow still runs with GOMAXPROCS set")
	}
	if n := runtime.GOMAXPROCS(0); n != before {
		t.Fatalf("GOMAXPROCS %d, want %d as it was", n, before)
	}
}
