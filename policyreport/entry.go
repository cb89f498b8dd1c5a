package policyreport

import (
	"slices"
	"strings"
	"unique"
)

// entry is one policy's result as a held report keeps it: what a Result
// says, properties as sorted key/value pairs rather than a map, and the time,
// in seconds, it was first given. A report is held for as long as its
// trigger lives, one for every trigger, so the form is kept small: what
// most triggers' results say alike is held once, behind a unique handle.
type entry struct {
	said unique.Handle[said]
	// props are key, value, key, value…, sorted by key.
	props []string
	at    int64
}

// said is what a result says besides its properties and time.
type said struct {
	policy, rule, status, message, category, severity string
	scored                                            bool
}

func saidOf(r *Result) unique.Handle[said] {
	return unique.Make(said{policy: r.Policy, rule: r.Rule, status: r.Result, message: r.Message,
		category: r.Category, severity: r.Severity, scored: r.Scored})
}

// entryOf is r as first given at second at.
func entryOf(r *Result, at int64) entry {
	e := entry{said: saidOf(r), at: at}
	if len(r.Properties) > 0 {
		keys := make([]string, 0, len(r.Properties))
		for k := range r.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		e.props = make([]string, 0, 2*len(keys))
		for _, k := range keys {
			e.props = append(e.props, k, r.Properties[k])
		}
	}
	return e
}

func (e *entry) policy() string { return e.said.Value().policy }

// says reports whether e holds what r says, its time aside.
func (e *entry) says(r *Result) bool {
	if e.said != saidOf(r) || len(e.props) != 2*len(r.Properties) {
		return false
	}
	for i := 0; i < len(e.props); i += 2 {
		if v, ok := r.Properties[e.props[i]]; !ok || v != e.props[i+1] {
			return false
		}
	}
	return true
}

// same reports whether e and o say the same, their times aside.
func (e *entry) same(o *entry) bool {
	return e.said == o.said && slices.Equal(e.props, o.props)
}

// entries are a trigger's results, one per policy, sorted by policy.
type entries []entry

func (es entries) find(policy string) (int, bool) {
	return slices.BinarySearchFunc(es, policy, func(e entry, p string) int { return strings.Compare(e.policy(), p) })
}

// set makes e the result of its policy.
func (es entries) set(e entry) entries {
	i, ok := es.find(e.policy())
	if ok {
		es[i] = e
		return es
	}
	return slices.Insert(es, i, e)
}

// without drops policy's result.
func (es entries) without(policy string) (entries, bool) {
	i, ok := es.find(policy)
	if !ok {
		return es, false
	}
	return slices.Delete(es, i, i+1), true
}
