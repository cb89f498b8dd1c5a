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

// TestGovernorRunsOnAllWhileHeld: while something holds the processors
// (a tenant's evaluation, which must not share the platform's), an idle
// Sprout runs on all of them; once released, the load decides again.
func TestGovernorRunsOnAllWhileHeld(t *testing.T) {
	var used time.Duration
	hold := false
	g := &Governor{Max: 4, Used: func() time.Duration { return used }, Set: func(int) {}, Held: func() bool { return hold }}
	at := time.Unix(0, 0)
	g.Begin(at)
	step := func() int {
		used += interval / 20
		at = at.Add(interval)
		return g.Step(at)
	}
	if n := step(); n != 1 {
		t.Fatalf("idle: %d processors, want 1", n)
	}
	hold = true
	if n := step(); n != 4 {
		t.Fatalf("idle and held: %d processors, want 4", n)
	}
	if n := step(); n != 4 {
		t.Fatalf("still held: %d processors, want 4", n)
	}
	hold = false
	if n := step(); n != 1 {
		t.Fatalf("idle, released: %d processors, want 1", n)
	}
}

// followable returns the runtime's default processors, skipping the test
// when Follow would keep them.
func followable(t *testing.T) int {
	t.Helper()
	max := runtime.GOMAXPROCS(0)
	if max < 2 {
		t.Skip("the runtime's default is one processor: nothing to follow")
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set: Follow keeps it")
	}
	return max
}

// waitForProcs waits until the process runs on want processors.
func waitForProcs(t *testing.T, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.GOMAXPROCS(0) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: GOMAXPROCS still %d after 30 s, want %d", what, runtime.GOMAXPROCS(0), want)
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // polling a condition, not ordering goroutines
	}
}

// TestHoldRaisesTheProcessors: Follow runs an idle process on all its
// processors while held, and its release lets the load lower them again.
func TestHoldRaisesTheProcessors(t *testing.T) {
	max := followable(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Follow(ctx, nil) }()
	defer func() { cancel(); <-done }()
	waitForProcs(t, 1, "idle")
	release := Hold()
	waitForProcs(t, max, "held")
	second := Hold()
	release()
	release() // a release counts once
	if !held() {
		t.Fatal("not held with one of two holds released")
	}
	second()
	if held() {
		t.Fatal("held after both holds were released")
	}
	waitForProcs(t, 1, "released")
}

func TestCollectionAheadOfAHeavyMarkOnly(t *testing.T) {
	const mib = 1 << 20
	// The runtime starts this heap's collection at 170 MiB at the earliest.
	heap := func(inUse uint64) Heap { return Heap{Live: 100 * mib, Goal: 200 * mib, InUse: inUse * mib} }
	perLead := func(m float64) float64 { return m * mib / lead.Seconds() }
	for _, c := range []struct {
		name string
		h    Heap
		mark time.Duration
		rate float64
		want bool
	}{
		{"heavy, just collected, growing slowly", heap(105), time.Second, perLead(10), false},
		{"heavy, 30 MiB away, growing 20 MiB a lead", heap(140), time.Second, perLead(20), false},
		{"heavy, 30 MiB away, growing 30 MiB a lead", heap(140), time.Second, perLead(30), true},
		{"heavy, just collected, growing fast", heap(105), time.Second, perLead(80), true},
		{"heavy, past the earliest start, not growing", heap(180), time.Second, 0, true},
		{"light mark, past the earliest start", heap(180), heavyMark, perLead(100), false},
		{"not yet measured", heap(180), 0, perLead(100), false},
		{"no way to the goal", Heap{Live: 100, Goal: 100, InUse: 150}, time.Second, 0, false},
	} {
		if got := CollectionAhead(c.h, c.mark, c.rate); got != c.want {
			t.Errorf("%s: CollectionAhead = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestGovernorRaisesAheadOfAHeavyCollection runs a governor over a
// made-up idle process whose heap grows towards a collection: the first
// collection's marking is measured, the processors are raised as the
// second nears and lowered once it is done. A light collection is not.
func TestGovernorRaisesAheadOfAHeavyCollection(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		mark time.Duration
		want []int
	}{
		{mark: 400 * time.Millisecond, want: []int{1, 4, 1}},
		{mark: 20 * time.Millisecond, want: []int{1}},
	} {
		var used time.Duration
		h := Heap{Live: 100 * mib, Goal: 200 * mib, InUse: 100 * mib}
		var set []int
		g := &Governor{Max: 4, Used: func() time.Duration { return used }, Heap: func() Heap { return h },
			Set: func(n int) { set = append(set, n) }}
		at := time.Unix(0, 0)
		g.Begin(at)
		step := func(grow uint64) int {
			used += interval / 20 // idle throughout
			h.InUse += grow * mib
			h.Allocated += grow * mib
			at = at.Add(interval)
			return g.Step(at)
		}
		collect := func() {
			h.Cycles++
			h.Mark += c.mark
			h.InUse = h.Live
		}
		step(20)
		collect() // the first collection: its marking is measured
		if n := step(1); n != 1 {
			t.Fatalf("mark %v: after a collection, idle: %d processors, want 1", c.mark, n)
		}
		for range 40 { // 40 MiB in 10 s: 31 MiB from the earliest start
			if n := step(1); n != 1 {
				t.Fatalf("mark %v: heap %d MiB, growing 1 MiB an interval: %d processors, want 1", c.mark, h.InUse/mib, n)
			}
		}
		step(10) // 10 MiB an interval: 20 MiB from the earliest start
		collect()
		step(1)
		if len(set) != len(c.want) {
			t.Fatalf("mark %v: set %v, want %v", c.mark, set, c.want)
		}
		for i := range set {
			if set[i] != c.want[i] {
				t.Fatalf("mark %v: set %v, want %v", c.mark, set, c.want)
			}
		}
	}
}

// TestReadHeapReadsTheRuntime reads this process's collector before and
// after a collection.
func TestReadHeapReadsTheRuntime(t *testing.T) {
	read := readHeap()
	before := read()
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 64<<10))
	}
	runtime.GC()
	after := read()
	runtime.KeepAlive(keep)
	if after.Cycles <= before.Cycles {
		t.Fatalf("cycles %d after a collection, %d before", after.Cycles, before.Cycles)
	}
	if after.Mark <= before.Mark {
		t.Fatalf("marking CPU %v after a collection, %v before", after.Mark, before.Mark)
	}
	if after.Allocated < before.Allocated+4<<20 {
		t.Fatalf("allocated %d after 4 MiB, %d before", after.Allocated, before.Allocated)
	}
	if after.Live < 4<<20 || after.Goal <= after.Live || after.InUse < after.Live/2 {
		t.Fatalf("heap %+v: want a live heap of at least the 4 MiB kept, and a goal above it", after)
	}
}

// TestFollowRunsAnIdleProcessOnOneProcessor runs Follow in this test
// process, which is idle, and waits for the runtime's GOMAXPROCS to drop
// to one; when Follow ends, the default is back.
func TestFollowRunsAnIdleProcessOnOneProcessor(t *testing.T) {
	max := followable(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Follow(ctx, nil) }()
	waitForProcs(t, 1, "an idle process")
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
