package ledger

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// Names resolves a policy name delivered by more than one source. The
// source of higher precedence runs it (the cluster first, then sources in
// the order they are configured); the others' copies are kept aside, and
// the next one takes over when the holder's copy goes (docs/decisions.md).
// The zero value holds no name.
type Names struct {
	mu     sync.Mutex
	copies map[policy.Key]map[string]sourceCopy // by source name
}

type sourceCopy struct {
	policy sources.Policy
	rank   int
}

// Claim records p, whose source has precedence rank (lower first), and
// reports whether its source holds the name now.
func (c *Names) Claim(key policy.Key, p sources.Policy, rank int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.copies == nil {
		c.copies = map[policy.Key]map[string]sourceCopy{}
	}
	if c.copies[key] == nil {
		c.copies[key] = map[string]sourceCopy{}
	}
	c.copies[key][p.Source] = sourceCopy{policy: p, rank: rank}
	return c.holderLocked(key) == p.Source
}

// Has reports whether source has delivered a copy of the policy.
func (c *Names) Has(key policy.Key, source string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.copies[key][source]
	return ok
}

// Sources names the sources that deliver a copy of the policy.
func (c *Names) Sources(key policy.Key) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.copies[key]))
	for s := range c.copies[key] {
		out = append(out, s)
	}
	return out
}

// Release forgets source's copy. held reports whether that copy was the one
// running; promoted, whether another source's copy takes over (next).
func (c *Names) Release(key policy.Key, source string) (next sources.Policy, held, promoted bool) {
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

// Holder names the source whose copy runs.
func (c *Names) Holder(key policy.Key) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holderLocked(key)
}

func (c *Names) holderLocked(key policy.Key) string {
	best, bestRank := "", 0
	for source, cl := range c.copies[key] {
		if best == "" || cl.rank < bestRank || cl.rank == bestRank && source < best {
			best, bestRank = source, cl.rank
		}
	}
	return best
}

// Len counts the names held.
func (c *Names) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.copies)
}

// OfSource counts the policies a source delivers, running or shadowed, and
// describes each name it shares with another source and which one runs it.
func (c *Names) OfSource(source string) (policies int, conflicts []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, copies := range c.copies {
		if _, ok := copies[source]; !ok {
			continue
		}
		policies++
		if len(copies) < 2 {
			continue
		}
		others := make([]string, 0, len(copies)-1)
		for s := range copies {
			if s != source {
				others = append(others, s)
			}
		}
		sort.Strings(others)
		conflicts = append(conflicts, fmt.Sprintf("%s is also in %s; %s runs it", key, strings.Join(others, ", "), c.holderLocked(key)))
	}
	sort.Strings(conflicts)
	return policies, conflicts
}
