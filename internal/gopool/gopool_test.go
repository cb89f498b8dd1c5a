package gopool

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoolKeepsItsBoundAndGoroutines(t *testing.T) {
	const n, jobs = 4, 200
	for _, p := range []*Pool{New(n), NewIdle(n, time.Hour)} {
		var running, most, done atomic.Int32
		var wg sync.WaitGroup
		for range jobs {
			wg.Add(1)
			p.Do(func() {
				defer wg.Done()
				now := running.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				done.Add(1)
				running.Add(-1)
			})
		}
		wg.Wait()
		p.Stop()
		if done.Load() != jobs {
			t.Errorf("%d of %d functions ran", done.Load(), jobs)
		}
		if most.Load() > n {
			t.Errorf("%d functions ran at once, more than %d", most.Load(), n)
		}
		if started := p.Started(); started < 1 || started > n {
			t.Errorf("%d goroutines started for %d functions, want 1 to %d", started, jobs, n)
		}
	}
}

// TestIdleGoroutinesEnd: a goroutine idle for the pool's idle time ends,
// and the next call starts another.
func TestIdleGoroutinesEnd(t *testing.T) {
	p := NewIdle(1, time.Millisecond)
	done := make(chan struct{})
	p.Do(func() { close(done) })
	<-done
	// Its token is given back when it ends: the pool's one slot is free.
	p.running <- struct{}{}
	<-p.running
	ran := make(chan struct{})
	p.Do(func() { close(ran) })
	<-ran
	if started := p.Started(); started != 2 {
		t.Errorf("%d goroutines started, want 2: the first ended idle", started)
	}
}
