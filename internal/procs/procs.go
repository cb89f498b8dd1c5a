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
package procs

import (
	"context"
	"log/slog"
	"os"
	"runtime"
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
)

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
	Log *slog.Logger

	current  int
	lastUsed time.Duration
	lastAt   time.Time
}

// Begin starts counting at now, on the Max processors.
func (g *Governor) Begin(now time.Time) {
	g.current, g.lastUsed, g.lastAt = g.Max, g.Used(), now
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
	if n := Next(g.current, g.Max, busy); n != g.current {
		g.Set(n)
		if g.Log != nil {
			g.Log.Debug("processors follow the load", "processors", n, "busy", busy)
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
	g := &Governor{Max: max, Used: processCPU, Log: log, Set: func(n int) {
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
		}
	}
}

// processCPU returns the user and system CPU time of the process so far.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
