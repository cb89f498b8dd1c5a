package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// A policy that opts in to background requests (skipBackgroundRequests
// false) triggers on what other policies generated. Each object Sprout
// generates from such a trigger carries the chain of policies that led to
// it (cluster.Object.Chain, counted only where the managed fields show
// Sprout wrote it), so a chain that comes back to a policy, or that grows
// past Options.MaxChain policies, stops there: that object is not the
// policy's trigger, and a Warning Event names the chain.

// ReasonChainBounded is the reason of the Event that tells that a trigger
// came of a chain of policies that holds the policy already, or that is
// as long as Options.MaxChain allows.
const ReasonChainBounded = "ChainBounded"

// DefaultMaxChain is how many policies a chain of generated objects may
// pass through, by default.
const DefaultMaxChain = 8

// chainStop returns why u may not trigger the policy key, a chain of
// policies holding it or as long as maxChain, or "" when it may.
func chainStop(key policy.Key, u *cluster.Object, maxChain int) string {
	chain := u.Chain()
	switch {
	case len(chain) == 0:
		return ""
	case slices.Contains(chain, key.String()):
		return fmt.Sprintf("%s %s came of the chain %s, which holds this policy: a cycle", u.GetKind(), objectRef(u), strings.Join(chain, " → "))
	case len(chain) >= maxChain:
		return fmt.Sprintf("%s %s came of a chain of %d policies (%s), the most --max-chain allows", u.GetKind(), objectRef(u),
			len(chain), strings.Join(chain, " → "))
	}
	return ""
}

// chainReports keeps, per policy, the last chain stop it reported, so that
// each full sync that passes over the same trigger does not say it again.
type chainReports struct {
	mu   sync.Mutex
	last map[policy.Key]string
}

// stopsChain reports whether a chain stops trigger u from triggering the
// policy, and tells so once, in the log and with an Event on the policy.
func (m *triggerMatcher) stopsChain(key policy.Key, cp *policy.Compiled, u *cluster.Object) bool {
	msg := chainStop(key, u, m.maxChain)
	if msg == "" {
		return false
	}
	m.chains.mu.Lock()
	same := m.chains.last[key] == msg
	if m.chains.last == nil {
		m.chains.last = map[policy.Key]string{}
	}
	m.chains.last[key] = msg
	m.chains.mu.Unlock()
	if same || m.dryRun {
		return true
	}
	m.log.Info("a chain of policies stops at a trigger", "policy", key.String(), "chain", msg)
	if ref := m.tell.Reference(key, cp); ref != nil {
		m.tell.Event(ref, corev1.EventTypeWarning, ReasonChainBounded, msg+"; it is not a trigger of this policy")
	}
	return true
}
