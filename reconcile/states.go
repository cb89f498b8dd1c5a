package reconcile

import "github.com/sprout-gitops/sprout/reconcile/state"

// policyState is what the core keeps of a policy between its syncs, with
// its incremental sync's tally; states, of every running policy.
type (
	policyState = state.State[tally]
	states      = state.States[tally]
)
