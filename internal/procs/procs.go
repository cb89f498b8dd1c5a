// Package procs owns how many processors Go runs Sprout's goroutines on
// (GOMAXPROCS), which it makes follow Sprout's load: one while Sprout uses
// little of a processor, the runtime's default once one processor is not
// enough.
//
// A controller mostly waits on the API server: each event passes through
// a handful of goroutines (the watch's reader, the informer, the queue, a
// worker, the request), and with a second processor idle the runtime wakes
// a thread for it at each hand-off, to find the work already taken. On a
// lightly loaded Sprout those wake-ups are a large part of what an event
// costs; on one processor there are none.
//
// A garbage collection is the one load that can be seen coming: the heap
// grows towards the runtime's goal, and a large heap's marking would keep
// one processor busy for longer than an interval. The governor runs on all
// processors ahead of such a collection, because a change of GOMAXPROCS
// waits for a running collection to finish, and the events behind one on a
// single processor wait with it.
//
// A tenant's evaluation is the other: the tenants' evaluations run on every
// processor but one, so that the platform's never wait behind them, and on
// one processor there is no other. While one runs (Hold), Sprout runs on
// all its processors.
package procs

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// raiseAt is the share of its processors Sprout must keep busy over an
	// interval for the next to run on all of them: one processor, 70%
	// busy, has work waiting for it.
	raiseAt = 0.7
	// lowerAt is how many processors' worth of CPU Sprout may use over an
	// interval and still run the next on one. The same work costs more
	// CPU on two processors than on one, so a load that raised them reads
	// above lowerAt after, and the setting does not flap.
	lowerAt = 0.5
	// interval is how often the load is read: a burst waits at most that
	// long for the other processors.
	interval = 250 * time.Millisecond
	// heavyMark is how much CPU a collection's marking may take and still
	// run on one processor: more would keep it busier than raiseAt over an
	// interval, which the load rule would answer by raising, too late.
	heavyMark = time.Duration(raiseAt * float64(interval))
	// triggerAt is how far the heap grows from its live size towards the
	// goal before the runtime starts a collection, at the earliest.
	triggerAt = 0.7
	// lead is how long before the heap reaches that point, at the rate it
	// grows, the processors are raised: the next reading may come an
	// interval late, and a rate read over one interval is not the next's.
	lead = 4 * interval
)

// Heap is what the runtime reports of its garbage collector.
type Heap struct {
	// Cycles is how many collections have completed.
	Cycles uint64
	// Mark is the CPU time all of them spent marking.
	Mark time.Duration
	// Allocated is how many bytes have been allocated on the heap so far.
	Allocated uint64
	// Live is the heap the last collection kept, InUse the heap now, and
	// Goal the size at which the next collection is to have finished.
	Live, InUse, Goal uint64
}

// CollectionAhead reports whether a collection whose marking takes mark
// of CPU may start, in heap h growing by rate bytes a second, within the
// lead time: then it is to run on all processors.
func CollectionAhead(h Heap, mark time.Duration, rate float64) bool {
	if mark <= heavyMark || h.Goal <= h.Live {
		return false
	}
	trigger := float64(h.Live) + triggerAt*float64(h.Goal-h.Live)
	return float64(h.InUse)+rate*lead.Seconds() >= trigger
}

// Next returns how many processors to run on after an interval in which
// Sprout kept busy processors' worth of CPU, running on current of at
// most max.
func Next(current, max int, busy float64) int {
	switch {
	case current < max && busy > raiseAt*float64(current):
		return max
	case current > 1 && busy < lowerAt:
		return 1
	}
	return current
}

// Governor sets the processors by the load of each interval.
type Governor struct {
	// Max is how many processors Sprout runs on under load.
	Max int
	// Used returns the CPU time the process has used so far.
	Used func() time.Duration
	// Set runs Sprout on n processors.
	Set func(n int)
	// Heap, if set, returns the garbage collector's figures.
	Heap func() Heap
	// Held, if set, reports whether something holds all the processors
	// (Hold).
	Held func() bool
	Log  *slog.Logger

	current  int
	lastUsed time.Duration
	lastAt   time.Time
	// cycles and marked are the collections completed and their marking
	// CPU at the last reading that saw one complete; mark is what the
	// collections since the one before took marking, each.
	cycles       uint64
	marked, mark time.Duration
	// allocated is the heap allocated so far at the last reading.
	allocated uint64
}

// Begin starts counting at now, on the Max processors.
func (g *Governor) Begin(now time.Time) {
	g.current, g.lastUsed, g.lastAt = g.Max, g.Used(), now
	if g.Heap != nil {
		h := g.Heap()
		g.cycles, g.marked, g.allocated = h.Cycles, h.Mark, h.Allocated
	}
}

// collectionAhead reads the heap and reports whether a heavy collection
// is near, elapsed after the last reading.
func (g *Governor) collectionAhead(elapsed time.Duration) bool {
	if g.Heap == nil {
		return false
	}
	h := g.Heap()
	if h.Cycles > g.cycles {
		g.mark = (h.Mark - g.marked) / time.Duration(h.Cycles-g.cycles)
		g.cycles, g.marked = h.Cycles, h.Mark
	}
	rate := float64(h.Allocated-g.allocated) / elapsed.Seconds()
	g.allocated = h.Allocated
	return CollectionAhead(h, g.mark, rate)
}

// Step reads the load since the last step and sets the processors for the
// next interval; it returns how many that is.
func (g *Governor) Step(now time.Time) int {
	used, elapsed := g.Used(), now.Sub(g.lastAt)
	if elapsed <= 0 {
		return g.current
	}
	busy := float64(used-g.lastUsed) / float64(elapsed)
	g.lastUsed, g.lastAt = used, now
	n := Next(g.current, g.Max, busy)
	gc := g.collectionAhead(elapsed)
	held := g.Held != nil && g.Held()
	if gc || held {
		n = g.Max
	}
	if n != g.current {
		g.Set(n)
		if g.Log != nil {
			g.Log.Debug("processors follow the load", "processors", n, "busy", busy, "collectionAhead", gc, "markPerCollection", g.mark, "held", held)
		}
		g.current = n
	}
	return g.current
}

// Follow makes the processors Go runs this process on follow its load
// until ctx ends, unless GOMAXPROCS is set in the environment, which is
// then kept, or the runtime's default is one processor already.
func Follow(ctx context.Context, log *slog.Logger) {
	max := runtime.GOMAXPROCS(0)
	if _, set := os.LookupEnv("GOMAXPROCS"); set || max <= 1 {
		return
	}
	g := &Governor{Max: max, Used: processCPU, Heap: readHeap(), Held: held, Log: log, Set: func(n int) {
		if n == max {
			// The default again, which the runtime keeps up to date with
			// the container's CPU limit.
			runtime.SetDefaultGOMAXPROCS()
			return
		}
		runtime.GOMAXPROCS(n)
	}}
	g.Begin(time.Now())
	t := time.NewTicker(interval)
	defer t.Stop()
	defer runtime.SetDefaultGOMAXPROCS()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			g.Step(now)
		case <-holding:
			// At once: the tenant's evaluation is running already.
			g.Step(time.Now())
		}
	}
}

var (
	holds atomic.Int64
	// holding wakes Follow when the first hold begins.
	holding = make(chan struct{}, 1)
)

// Hold runs Sprout on all its processors, if Follow had it on fewer, until
// release is called; holds may overlap. Without Follow it does nothing.
func Hold() (release func()) {
	if holds.Add(1) == 1 {
		select {
		case holding <- struct{}{}:
		default:
		}
	}
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			holds.Add(-1)
		}
	}
}

func held() bool { return holds.Load() > 0 }

// processCPU returns the user and system CPU time of the process so far.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// readHeap returns a reader of the collector's figures from
// runtime/metrics, which reads them without stopping the world.
func readHeap() func() Heap {
	names := []string{
		"/gc/cycles/total:gc-cycles",
		"/cpu/classes/gc/mark/assist:cpu-seconds",
		"/cpu/classes/gc/mark/dedicated:cpu-seconds",
		"/cpu/classes/gc/mark/idle:cpu-seconds",
		"/gc/heap/live:bytes",
		"/memory/classes/heap/objects:bytes",
		"/gc/heap/goal:bytes",
		"/gc/heap/allocs:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	u := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	seconds := func(i int) time.Duration {
		if samples[i].Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return time.Duration(samples[i].Value.Float64() * float64(time.Second))
	}
	return func() Heap {
		metrics.Read(samples)
		return Heap{
			Cycles:    u(0),
			Mark:      seconds(1) + seconds(2) + seconds(3),
			Live:      u(4),
			InUse:     u(5),
			Goal:      u(6),
			Allocated: u(7),
		}
	}
}
