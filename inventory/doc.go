// Package inventory owns Sprout's writes: it labels downstream objects so they
// can always be found again, applies the desired set with server-side apply
// and reports every object's outcome as a change set.
//
// It never evaluates CEL and never decides what a policy wants: reconcile
// hands it complete desired objects. Pruning and the persistent per-policy
// record (DESIGN §5) are built on the same labels. Drifted tells, from an
// object's managed fields and its applied stamp alone, whether it still holds
// what Sprout last applied: what `sprout inventory` reports as drift. Cached
// is how the controller's caches hold Sprout's objects for Apply to compare
// with: compact, and decoded only when compared.
package inventory
