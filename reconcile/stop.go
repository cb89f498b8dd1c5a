package reconcile

import (
	"context"
	"time"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// A sync under way when its policy is deleted stops writing: its context
// is cancelled, so that no part of its triggers is applied after the one
// under way (Applier.Apply starts no object once its context ends), and
// the policy's last sync, queued by the deletion, prunes what it wrote.

// stopping reports whether Sprout is stopping (outer is the controller's
// context): a sync it interrupted reports nothing, for a request it
// cancelled is no failure of the policy's, and the next start syncs again.
func stopping(outer context.Context) bool { return outer.Err() != nil }

// reportsYield is the longest a report write waits for the syncs under
// way to end: a controller that is never idle still writes its reports.
const reportsYield = 5 * time.Second

// beginSync returns the context of a sync of cp's policy, cancelled when
// the policy is deleted, and the function that ends it.
func (l syncerCore) beginSync(ctx context.Context, key policy.Key, cp *policy.Compiled) (context.Context, func()) {
	c := l.c
	ctx, cancel := context.WithCancel(ctx)
	c.syncs.Started(key, cancel)
	if !l.running(key, cp) {
		cancel() // deleted between the read of the policy and now
	}
	return ctx, func() {
		c.syncs.Ended(key)
		cancel()
	}
}

// running reports whether cp's policy still runs, and not another policy
// since created under its name.
func (l syncerCore) running(key policy.Key, cp *policy.Compiled) bool {
	cur, _ := l.policy(key)
	return cur != nil && cur.Policy.GetUID() == cp.Policy.GetUID()
}

// stopSync cancels the sync of a policy under way, if any.
func (c *Controller) stopSync(key policy.Key) { c.syncs.Stop(key) }
