package inventory

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestWorkersKeepTheirBoundAndGoroutines(t *testing.T) {
	const n, jobs = 4, 200
	w := newWorkers(n)
	var running, most, done atomic.Int32
	var wg sync.WaitGroup
	for range jobs {
		wg.Add(1)
		w.do(func() {
			defer wg.Done()
			now := running.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			done.Add(1)
			running.Add(-1)
		})
	}
	wg.Wait()
	w.stop()
	if done.Load() != jobs {
		t.Errorf("%d of %d functions ran", done.Load(), jobs)
	}
	if most.Load() > n {
		t.Errorf("%d functions ran at once, more than %d", most.Load(), n)
	}
	if started := len(w.started); started < 1 || started > n {
		t.Errorf("%d goroutines started for %d functions, want 1 to %d", started, jobs, n)
	}
}
