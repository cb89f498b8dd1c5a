// Package inventory owns what Sprout writes about and for a policy: the
// labels that tie each generated object to its policy and trigger, the
// writes of the desired set (server-side apply, or a create for an object
// that does not exist), pruning, and the PolicyInventory records. It
// reports every object's outcome as a change set.
//
// It never evaluates CEL and never decides what a policy wants: reconcile
// hands it complete desired objects and says when to prune. Pruning and the
// record are built on the labels, so an object is found again after a
// crash or a lost record. Drifted tells, from an object's managed fields
// and its applied stamp alone, whether it still holds what Sprout last
// applied: what `sprout inventory` reports as drift. Apply compares the
// desired objects with the controller's caches of Sprout's objects
// (cluster.Object, through Live) and reports the versions its creates made
// (Creates); it never reads a watch.
//
// A policy's status, its Events and the PolicySources' status are written
// by reconcile, not here.
package inventory
