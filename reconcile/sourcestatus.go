package reconcile

import (
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/sources"
)

// Reasons of a PolicySource's Ready condition and of its Events (package
// report writes them).
const (
	ReasonRevisionTaken    = report.ReasonRevisionTaken
	ReasonRevisionRejected = report.ReasonRevisionRejected
	ReasonCheckFailed      = report.ReasonCheckFailed
	ReasonChecking         = report.ReasonChecking
	ReasonWatching         = report.ReasonWatching
	ReasonPolicyConflict   = report.ReasonPolicyConflict
)

// sourcesChanged queues the PolicySource of every source delivering the
// policy.
func (c *Controller) sourcesChanged(key policy.Key) {
	c.sourceStatus.Changed(c.ledger.Names().Sources(key)...)
}

// source returns the configured source of that name.
func (c *Controller) source(name string) sources.Source {
	for _, s := range c.opts.Sources {
		if s.Name() == name {
			return s
		}
	}
	return nil
}
