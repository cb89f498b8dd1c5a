package evaluate

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// acquired runs Acquire in the background and reports its release once it
// returns.
func acquired(t *testing.T, c *Cores, tenant string) <-chan func() {
	t.Helper()
	got := make(chan func(), 1)
	go func() {
		release, err := c.Acquire(context.Background(), tenant)
		if err != nil {
			close(got)
			return
		}
		got <- release
	}()
	return got
}

// waitWaiting waits until n acquisitions wait: Acquire queues itself
// before it blocks, so this orders the test's calls without sleeping.
func waitWaiting(t *testing.T, c *Cores, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting %d, want %d", c.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustAcquire(t *testing.T, c *Cores, tenant string) func() {
	t.Helper()
	release, err := c.Acquire(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

func TestPlatformNeverWaitsForTenants(t *testing.T) {
	c := NewCores(2)
	mustAcquire(t, c, "team-a")
	blocked := acquired(t, c, "team-a")
	waitWaiting(t, c, 1)
	// The tenants' one processor is taken and another evaluation waits:
	// the platform's goes on at once, however many it runs.
	for range 10 {
		mustAcquire(t, c, "")()
	}
	select {
	case <-blocked:
		t.Fatal("a tenant's second evaluation ran beside its first on a two-processor share")
	default:
	}
}

func TestTenantsTakeTurns(t *testing.T) {
	c := NewCores(3) // two processors for tenants
	first, second := mustAcquire(t, c, "team-a"), mustAcquire(t, c, "team-a")
	a3 := acquired(t, c, "team-a")
	waitWaiting(t, c, 1)
	a4 := acquired(t, c, "team-a")
	waitWaiting(t, c, 2)
	b1 := acquired(t, c, "team-b")
	waitWaiting(t, c, 3)

	// team-a waited first, so the first processor given back is its
	// turn; the next is team-b's, although team-a queued more before it.
	first()
	releaseA3 := <-a3
	second()
	releaseB1 := <-b1
	select {
	case <-a4:
		t.Fatal("team-a's third evaluation ran before team-b's first")
	default:
	}
	releaseA3()
	(<-a4)()
	releaseB1()
	if c.free != 2 || c.Waiting() != 0 {
		t.Fatalf("free %d, waiting %d after every release; want 2, 0", c.free, c.Waiting())
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	c := NewCores(2)
	held := mustAcquire(t, c, "team-a")
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "team-b")
		gone <- err
	}()
	waitWaiting(t, c, 1)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after its context ended: %v, want context.Canceled", err)
	}
	// The withdrawn turn is not handed a processor: the next tenant is.
	next := acquired(t, c, "team-c")
	waitWaiting(t, c, 1)
	held()
	(<-next)()
	if c.free != 1 || c.Waiting() != 0 {
		t.Fatalf("free %d, waiting %d; want 1, 0", c.free, c.Waiting())
	}
}

func TestTenantsNeverHoldMoreThanTheirProcessors(t *testing.T) {
	const n = 4
	c := NewCores(n)
	var running, most atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			release, err := c.Acquire(context.Background(), []string{"a", "b", "c"}[i%3])
			if err != nil {
				t.Error(err)
				return
			}
			now := running.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			runtime.Gosched()
			running.Add(-1)
			release()
		})
	}
	wg.Wait()
	if most.Load() > n-1 {
		t.Fatalf("%d tenant evaluations ran at once, want at most %d", most.Load(), n-1)
	}
}
