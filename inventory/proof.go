package inventory

import "github.com/sprout-gitops/sprout/cluster"

// A policy's objects are found by their labels and annotation (the
// label-selected caches, their index by policy), but those are anyone's
// to copy who may patch an object: copied onto a tenant's own object, they
// made Sprout delete it with the policy's rights when the policy pruned (a
// delete by proxy), write over it, or, rebuilding a lost record, admit the
// trigger it named. Managed fields that say Sprout wrote them stop a copy
// made as anyone else, but a client may name itself sprout. So what takes
// an object for a policy's own asks for the proof Sprout signed into it
// (cluster.Object.Proven): pruning (Decisions.Stale, stale, Data) and
// rebuilding a record (Proven). Writing over an object that exists
// (decideOwner) takes the managed fields too: the policy's content
// written over an object whose origin was forged harms only its forger,
// and the write signs it. An object proven neither way is left as it is,
// and named NotOwned where the policy wants its name.

// Proven returns the objects of objs whose origin Sprout signed: the ones
// a policy may prune or learn its past from. objs itself when that is all
// of them; otherwise a new slice.
func Proven(objs []*cluster.Object) []*cluster.Object {
	for i, o := range objs {
		if o.Proven() {
			continue
		}
		out := append(make([]*cluster.Object, 0, len(objs)-1), objs[:i]...)
		for _, o := range objs[i+1:] {
			if o.Proven() {
				out = append(out, o)
			}
		}
		return out
	}
	return objs
}
