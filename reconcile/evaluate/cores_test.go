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

// fakeClock is a clock a test moves: after hands back a channel the test
// fires, and notes each wait asked for.
type fakeClock struct {
	mu     sync.Mutex
	at     time.Time
	waits  []time.Duration
	timers []chan time.Time
	asked  chan struct{}
}

func newFakeClock() *fakeClock {
	return &fakeClock{at: time.Unix(1_000_000, 0), asked: make(chan struct{}, 16)}
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = f.at.Add(d)
}

func (f *fakeClock) after(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	f.waits, f.timers = append(f.waits, d), append(f.timers, ch)
	f.asked <- struct{}{}
	return ch
}

// waitAsked waits until a wait is asked for: the tenant owes.
func (f *fakeClock) waitAsked(t *testing.T) {
	t.Helper()
	select {
	case <-f.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("no wait asked for: the tenant owes nothing")
	}
}

// fire moves the clock by the last wait asked for and ends it.
func (f *fakeClock) fire() {
	f.mu.Lock()
	d, ch := f.waits[len(f.waits)-1], f.timers[len(f.timers)-1]
	f.at = f.at.Add(d)
	f.mu.Unlock()
	ch <- f.now()
}

func budgeted(share float64, burst time.Duration) (*Cores, *fakeClock) {
	clock := newFakeClock()
	c := NewCores(2).Budget(share, burst)
	c.now, c.after = clock.now, clock.after
	return c, clock
}

// A tenant whose evaluation ran past its credit waits, before its next,
// until its share has paid the debt back: at a quarter of a processor and
// a burst of one second, a five-second spin costs the next evaluation
// sixteen seconds.
func TestTenantWaitsOffWhatItsEvaluationsOwe(t *testing.T) {
	c, clock := budgeted(0.25, time.Second)
	release := mustAcquire(t, c, "team-a")
	clock.advance(5 * time.Second) // spun to the time limit
	release()

	next := acquired(t, c, "team-a")
	clock.waitAsked(t)
	if got := clock.waits[0]; got != 16*time.Second {
		t.Fatalf("waits %s, want 16s: four seconds owed at a quarter of a processor", got)
	}
	select {
	case <-next:
		t.Fatal("ran before its debt was paid")
	default:
	}
	// The platform, and a tenant that owes nothing, do not wait meanwhile.
	mustAcquire(t, c, "")()
	mustAcquire(t, c, "team-b")()
	clock.fire()
	if r, ok := <-next; !ok {
		t.Fatal("no turn once paid")
	} else {
		r()
	}
}

// Evaluations within the burst never wait, however many: a tenant's
// ordinary syncs are not held.
func TestTenantWithinItsBurstDoesNotWait(t *testing.T) {
	c, clock := budgeted(0.25, time.Second)
	for range 100 {
		release := mustAcquire(t, c, "team-a")
		clock.advance(5 * time.Millisecond)
		release()
		clock.advance(20 * time.Millisecond) // earns the 5 ms back
	}
	if len(clock.waits) != 0 {
		t.Errorf("waited %v within the burst", clock.waits)
	}
	// Credit refills to the burst and no further: a tenant idle for an
	// hour runs one second at once, then owes.
	clock.advance(time.Hour)
	release := mustAcquire(t, c, "team-a")
	clock.advance(3 * time.Second)
	release()
	blocked := acquired(t, c, "team-a")
	clock.waitAsked(t)
	if got := clock.waits[0]; got != 8*time.Second {
		t.Errorf("waits %s after an idle hour and a three-second run, want 8s (two owed at a quarter)", got)
	}
	clock.fire()
	(<-blocked)()
}

// A wait for the debt ends with its context.
func TestDebtWaitEndsWithItsContext(t *testing.T) {
	c, clock := budgeted(0.5, time.Second)
	release := mustAcquire(t, c, "team-a")
	clock.advance(10 * time.Second)
	release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "team-a")
		done <- err
	}()
	clock.waitAsked(t)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestTenantTurnHoldsAllProcessors: while a tenant's evaluation holds its
// turn, Sprout is held on all its processors (procs.Hold), with and
// without a budget: the tenants' processors are every one but the
// platform's, and on one there would be none left for the platform. The
// platform's evaluations hold nothing.
func TestTenantTurnHoldsAllProcessors(t *testing.T) {
	for _, share := range []float64{0, 0.25} {
		var holds atomic.Int32
		hold := func() func() {
			holds.Add(1)
			return func() { holds.Add(-1) }
		}
		c := NewCores(2).Budget(share, time.Second).Holding(hold)
		mustAcquire(t, c, "")()
		if n := holds.Load(); n != 0 {
			t.Fatalf("share %v: %d holds after the platform's evaluation, want 0", share, n)
		}
		release := mustAcquire(t, c, "team-a")
		if n := holds.Load(); n != 1 {
			t.Fatalf("share %v: %d holds while a tenant's evaluation runs, want 1", share, n)
		}
		release()
		if n := holds.Load(); n != 0 {
			t.Fatalf("share %v: %d holds after the tenant's turn ended, want 0", share, n)
		}
	}
	// A wait that ends with its context held no turn, and holds nothing.
	var holds atomic.Int32
	c := NewCores(2).Holding(func() func() { holds.Add(1); return func() { holds.Add(-1) } })
	release := mustAcquire(t, c, "team-a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Acquire(ctx, "team-b"); err == nil {
		t.Fatal("a wait for a taken turn did not end with its context")
	}
	if n := holds.Load(); n != 1 {
		t.Fatalf("%d holds with one turn taken, want 1", n)
	}
	release()
}
