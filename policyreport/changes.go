package policyreport

import "slices"

// change is a policy whose result changed since the last write, with the
// number of its latest change.
type change struct {
	policy string
	n      uint64
}

// changes are a held report's changes not yet written. A slice, not a map:
// a report is held per trigger, and its changes are few (one per policy).
type changes []change

// of returns the number of policy's latest change.
func (cs changes) of(policy string) (uint64, bool) {
	for _, c := range cs {
		if c.policy == policy {
			return c.n, true
		}
	}
	return 0, false
}

// has reports whether policy's result changed.
func (cs changes) has(policy string) bool {
	_, ok := cs.of(policy)
	return ok
}

// mark records change n of policy's result.
func (cs changes) mark(policy string, n uint64) changes {
	for i := range cs {
		if cs[i].policy == policy {
			cs[i].n = n
			return cs
		}
	}
	return append(cs, change{policy: policy, n: n})
}

// without drops the changes done reports done.
func (cs changes) without(done func(change) bool) changes {
	cs = slices.DeleteFunc(cs, done)
	if len(cs) == 0 {
		return nil
	}
	return cs
}
