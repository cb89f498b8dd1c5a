package evaluate

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
)

// Cores shares the processors among tenants' evaluations, as the API
// server's priority and fairness shares its seats among priority levels:
// the platform's policies (cluster policies, tenant "") are never held,
// and the tenants' (one per namespace of NamespacedGeneratingPolicies)
// run together on at most every processor but one, handed out in turn
// among the tenants waiting. A tenant's evaluation spinning to its time
// limit then takes one processor, never the platform's, and another
// tenant waits for at most one turn of each tenant ahead of it.
//
// The queue shares workers, not processors: four workers of a tenant
// each spinning on a processor take a two-processor machine whatever the
// other workers are given.
//
// Turns bound how many processors tenants take at once, not for how long:
// a tenant whose triggers change as fast as its evaluations spin to their
// limit would keep one busy for good, which on a machine of two, or in a
// pod limited to one, is half of it or all. So each tenant's evaluations
// are also charged the time they ran (Budget): a tenant holds credit of up
// to a burst, which refills at its share of a processor, and one whose
// credit is spent waits, before its next turn, until it is paid back.
type Cores struct {
	mu    sync.Mutex
	free  int
	ring  []string
	turns map[string][]chan struct{}

	// share and burst are each tenant's budget (Budget); share 0 is none.
	share float64
	burst time.Duration
	// accounts are the tenants' credits that are not full: a tenant
	// missing has its burst.
	accounts map[string]*account
	now      func() time.Time
	after    func(time.Duration) <-chan time.Time
	// waits, if set, is told of each wait for a debt, before it.
	waits func(tenant string, owed time.Duration)
	// hold, if set, is called as a tenant's evaluation gets its turn, and
	// what it returns as the turn ends (Holding).
	hold func() (release func())
}

// account is a tenant's credit at a time: what it may still run before it
// waits, less than zero when it owes.
type account struct {
	credit time.Duration
	at     time.Time
}

// NewCores shares n processors: tenants get n-1 of them, at least one.
// n 0 is GOMAXPROCS.
func NewCores(n int) *Cores {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return &Cores{free: max(n-1, 1), turns: map[string][]chan struct{}{},
		accounts: map[string]*account{}, now: time.Now, after: time.After}
}

// Budget charges each tenant's evaluations the time they run: a tenant may
// run burst at once, and share of one processor on average (0.25: a
// quarter); past its credit it waits until share has paid it back. share
// 0 charges nothing. It returns c, and is called before c is used.
func (c *Cores) Budget(share float64, burst time.Duration) *Cores {
	c.share, c.burst = share, burst
	return c
}

// ValidateShare checks a share as Budget takes it: 0 or more.
func ValidateShare(share float64) error {
	if share < 0 || math.IsNaN(share) {
		return fmt.Errorf("%v is not a share of a processor: 0 (no budget) or more", share)
	}
	return nil
}

// Waits has c tell waits of each wait for a tenant's debt, as it begins:
// an operator sees why a tenant's policies are slow. It returns c, and is
// called before c is used.
func (c *Cores) Waits(waits func(tenant string, owed time.Duration)) *Cores {
	c.waits = waits
	return c
}

// Holding has c call hold as a tenant's evaluation gets its turn on a
// processor, and what hold returns once the turn is given back: Sprout
// runs on all its processors meanwhile (procs.Hold), for "every processor
// but one" means one for the platform only while there are more. It
// returns c, and is called before c is used.
func (c *Cores) Holding(hold func() (release func())) *Cores {
	c.hold = hold
	return c
}

// Acquire waits until tenant owes no time (Budget), then for its turn on a
// processor, and returns what gives it back, charging the time it was
// held, or ctx's error. The platform's evaluations ("") never wait.
func (c *Cores) Acquire(ctx context.Context, tenant string) (release func(), err error) {
	if c == nil || tenant == "" {
		return func() {}, nil
	}
	if err := c.payDebt(ctx, tenant); err != nil {
		return nil, err
	}
	held, err := c.turn(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if c.hold != nil {
		processors, turn := c.hold(), held
		held = func() { turn(); processors() }
	}
	if c.share <= 0 {
		return held, nil
	}
	began := c.now()
	return func() {
		c.charge(tenant, c.now().Sub(began))
		held()
	}, nil
}

// payDebt waits until tenant owes nothing, or ctx ends. The wait is no turn
// held: other tenants run meanwhile.
func (c *Cores) payDebt(ctx context.Context, tenant string) error {
	for {
		c.mu.Lock()
		owed := c.owedLocked(tenant)
		c.mu.Unlock()
		if owed <= 0 {
			return nil
		}
		if c.waits != nil {
			c.waits(tenant, owed)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.after(owed):
		}
	}
}

// owedLocked is how long tenant waits before its credit is back to zero,
// 0 when it holds credit. A full credit is forgotten.
func (c *Cores) owedLocked(tenant string) time.Duration {
	a := c.accounts[tenant]
	if a == nil {
		return 0
	}
	c.refillLocked(a)
	if a.credit >= c.burst {
		delete(c.accounts, tenant)
		return 0
	}
	if a.credit >= 0 {
		return 0
	}
	return time.Duration(float64(-a.credit) / c.share)
}

// refillLocked adds to a the credit its tenant's share earned since a.at,
// up to the burst.
func (c *Cores) refillLocked(a *account) {
	now := c.now()
	a.credit = min(c.burst, a.credit+time.Duration(c.share*float64(now.Sub(a.at))))
	a.at = now
}

// charge takes ran from tenant's credit.
func (c *Cores) charge(tenant string, ran time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.accounts[tenant]
	if a == nil {
		a = &account{credit: c.burst, at: c.now()}
		c.accounts[tenant] = a
	}
	c.refillLocked(a)
	a.credit -= ran
}

// turn waits for tenant's turn on a processor and returns what gives it
// back, or ctx's error.
func (c *Cores) turn(ctx context.Context, tenant string) (release func(), err error) {
	c.mu.Lock()
	if c.free > 0 && len(c.ring) == 0 {
		c.free--
		c.mu.Unlock()
		return c.release, nil
	}
	turn := make(chan struct{})
	if len(c.turns[tenant]) == 0 {
		c.ring = append(c.ring, tenant)
	}
	c.turns[tenant] = append(c.turns[tenant], turn)
	c.mu.Unlock()
	select {
	case <-turn:
		return c.release, nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.withdraw(tenant, turn) {
			// Handed the turn as ctx ended: pass it on.
			c.releaseLocked()
		}
		return nil, ctx.Err()
	}
}

// release gives a processor back: to the next tenant in turn, if any waits.
func (c *Cores) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked()
}

func (c *Cores) releaseLocked() {
	if len(c.ring) == 0 {
		c.free++
		return
	}
	tenant := c.ring[0]
	c.ring = c.ring[1:]
	waiting := c.turns[tenant]
	close(waiting[0])
	if rest := waiting[1:]; len(rest) > 0 {
		c.turns[tenant] = rest
		c.ring = append(c.ring, tenant)
	} else {
		delete(c.turns, tenant)
	}
}

// withdraw removes turn from tenant's waiting ones; false if it was
// handed out already.
func (c *Cores) withdraw(tenant string, turn chan struct{}) bool {
	waiting := c.turns[tenant]
	for i, t := range waiting {
		if t != turn {
			continue
		}
		waiting = append(waiting[:i:i], waiting[i+1:]...)
		if len(waiting) > 0 {
			c.turns[tenant] = waiting
			return true
		}
		delete(c.turns, tenant)
		for j, name := range c.ring {
			if name == tenant {
				c.ring = append(c.ring[:j:j], c.ring[j+1:]...)
				break
			}
		}
		return true
	}
	return false
}

// Waiting counts the evaluations waiting for a processor.
func (c *Cores) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.turns {
		n += len(w)
	}
	return n
}
