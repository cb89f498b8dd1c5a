package reconcile

import "github.com/sprout-gitops/sprout/reconcile/state"

// policyState is what the core keeps of a policy between its syncs;
// states, of every running policy; tally, its incremental sync's memory.
type (
	policyState  = state.State
	states       = state.States
	tally        = state.Tally
	contribution = state.Contribution
)
