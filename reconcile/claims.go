package reconcile

import (
	"sync"

	"github.com/sprout-gitops/sprout/sources"
)

// claims resolves a policy name delivered by more than one source. The
// source of higher precedence runs it (the cluster first, then sources in
// the order they are configured); the others' copies are kept aside, and
// the next one takes over when the holder's copy goes (docs/decisions.md).
type claims struct {
	mu     sync.Mutex
	copies map[policyKey]map[string]claim // by source name
}

type claim struct {
	policy sources.Policy
	rank   int
}

// claim records p and reports whether its source holds the name now.
func (c *claims) claim(key policyKey, p sources.Policy, rank int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.copies == nil {
		c.copies = map[policyKey]map[string]claim{}
	}
	if c.copies[key] == nil {
		c.copies[key] = map[string]claim{}
	}
	c.copies[key][p.Source] = claim{policy: p, rank: rank}
	return c.holderLocked(key) == p.Source
}

// release forgets source's copy. held reports whether that copy was the one
// running; promoted, whether another source's copy takes over (next).
func (c *claims) release(key policyKey, source string) (next sources.Policy, held, promoted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	held = c.holderLocked(key) == source
	delete(c.copies[key], source)
	if len(c.copies[key]) == 0 {
		delete(c.copies, key)
		return sources.Policy{}, held, false
	}
	if !held {
		return sources.Policy{}, false, false
	}
	return c.copies[key][c.holderLocked(key)].policy, true, true
}

// holder names the source whose copy runs.
func (c *claims) holder(key policyKey) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holderLocked(key)
}

func (c *claims) holderLocked(key policyKey) string {
	best, bestRank := "", 0
	for source, cl := range c.copies[key] {
		if best == "" || cl.rank < bestRank || cl.rank == bestRank && source < best {
			best, bestRank = source, cl.rank
		}
	}
	return best
}

// rank is a source's precedence: the cluster first, then the order of
// Options.Sources.
func (c *Controller) rank(source string) int {
	if source == sources.ClusterSourceName {
		return -1
	}
	for i, s := range c.opts.Sources {
		if s.Name() == source {
			return i
		}
	}
	return len(c.opts.Sources)
}
