package evaluate

import (
	"context"
	"runtime"
	"sync"
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
type Cores struct {
	mu    sync.Mutex
	free  int
	ring  []string
	turns map[string][]chan struct{}
}

// NewCores shares n processors: tenants get n-1 of them, at least one.
// n 0 is GOMAXPROCS.
func NewCores(n int) *Cores {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return &Cores{free: max(n-1, 1), turns: map[string][]chan struct{}{}}
}

// Acquire waits for tenant's turn on a processor and returns what gives it
// back, or ctx's error. The platform's evaluations ("") never wait.
func (c *Cores) Acquire(ctx context.Context, tenant string) (release func(), err error) {
	if c == nil || tenant == "" {
		return func() {}, nil
	}
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
