package inventory

import "github.com/sprout-gitops/sprout/cluster"

// A policy's objects are found by their labels and annotation (the
// label-selected caches, their index by policy), but those are anyone's
// to copy who may patch an object: copied onto a tenant's own object, they
// made Sprout delete it with the policy's rights when the policy pruned (a
// delete by proxy), write over it, or, rebuilding a lost record, admit the
// trigger it named. So whatever treats an object as a policy's own asks
// first whether Sprout wrote its origin, which the object's managed fields
// tell (cluster.Object.OriginWritten): pruning (Decisions.Stale, stale,
// Data), writing over an object that exists (decideOwner) and rebuilding a
// record (Proven). An object whose origin Sprout did not write is left as
// it is, and named NotOwned where the policy wants its name.

// Proven returns the objects of objs whose origin Sprout wrote: the ones a
// policy may prune, write over or learn its past from. objs itself when
// that is all of them; otherwise a new slice.
func Proven(objs []*cluster.Object) []*cluster.Object {
	for i, o := range objs {
		if o.OriginWritten() {
			continue
		}
		out := append(make([]*cluster.Object, 0, len(objs)-1), objs[:i]...)
		for _, o := range objs[i+1:] {
			if o.OriginWritten() {
				out = append(out, o)
			}
		}
		return out
	}
	return objs
}
