package sources

import (
	"k8s.io/apimachinery/pkg/labels"
)

// Selective is a source that can deliver only the policies whose labels a
// selector matches (--policy-selector), so that a cluster moves from
// Kyverno one policy at a time. A policy that stops matching is gone from
// the source, as a deleted one is.
type Selective interface {
	// SelectPolicies sets the selector; call it before Start.
	SelectPolicies(sel labels.Selector)
}

var (
	_ Selective = (*Cluster)(nil)
	_ Selective = (*poller)(nil)
)

// SelectPolicies makes the informers list and watch only the policies sel
// matches: the API server filters, and a policy relabelled out of the
// selector is a deletion to the informer.
func (c *Cluster) SelectPolicies(sel labels.Selector) { c.selector = sel }

// SelectPolicies makes every revision deliver only the policies sel
// matches; the others are read and compiled all the same, so a broken
// policy still rejects its revision.
func (p *poller) SelectPolicies(sel labels.Selector) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.selector = sel
}

// selects reports whether sel (nil: everything) matches the policy's labels.
func selects(sel labels.Selector, set map[string]string) bool {
	return sel == nil || sel.Matches(labels.Set(set))
}
