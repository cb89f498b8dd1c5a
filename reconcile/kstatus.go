package reconcile

import (
	"context"

	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/sources"
)

// markProgressing reports a policy Reconciling when a sync of a generation
// its status does not describe yet begins, once per generation. It never
// replaces an outcome not yet written: that outcome is the truth until
// this sync's own replaces it, and a sync cut short must not leave
// Reconciling in its place.
func (c *Controller) markProgressing(key policy.Key, cp *policy.Compiled) {
	gen := cp.Policy.GetGeneration()
	if c.opts.DryRun || cp.Source != sources.ClusterSourceName || !report.Progressing(cp.Policy) {
		return
	}
	if !c.states.of(key).progress(gen) {
		return
	}
	c.reports.mu.Lock()
	_, pending := c.reports.pending[key]
	c.reports.mu.Unlock()
	if !pending {
		c.reportLater(key, cp, outcome{Reason: ReasonProgressing})
	}
}

// reportProgressing writes Reconciling on a policy whose new generation a
// sync is applying. The sync's outcome, when it comes first, replaces it
// before it is written: a quick sync writes its status once.
func (c *Controller) reportProgressing(ctx context.Context, cp *policy.Compiled) error {
	patch := report.ProgressingStatus(c.liveStatus(cp), cp.Policy.GetGeneration())
	if patch == nil {
		return nil
	}
	return c.patchStatus(ctx, cp, patch)
}
