package reconcile

import (
	"time"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// retired is a policy gone from its source whose objects may still need
// cleaning up: what its last sync needs to know.
type retired struct {
	ref                 sproutv1alpha1.PolicyReference
	synchronize, orphan bool
	// account is the ServiceAccount the policy ran as, which prunes what
	// it leaves; zero for Sprout's own.
	account access.Account
}

// retireOrphanRecords queues the records of policies that source no longer
// holds: deleted while Sprout was not running. It runs once a source has
// delivered a whole revision; records of sources not configured now are
// left alone (a source dropped from the flags is not a mass deletion), and
// so are those of policies another shard selects.
func (c *Controller) retireOrphanRecords(source string) {
	for _, rec := range c.ledger.Records() {
		if rec.Spec.Source != source {
			continue
		}
		key := ledger.KeyOf(rec)
		c.mu.Lock()
		_, running := c.policies[key]
		c.mu.Unlock()
		if running || c.otherShards(source, key) {
			continue
		}
		// It enters to leave: its last sync prunes what the record says
		// it wrote to.
		c.states.Enter(key).Ledger().RestoreWritten(rec)
		c.mu.Lock()
		c.deleted[key] = retired{ref: rec.Spec.Policy, synchronize: rec.Spec.Synchronize, orphan: rec.Spec.Orphan}
		c.mu.Unlock()
		c.log.Info("policy gone while Sprout was stopped", "policy", key.String())
		c.queue.Add(key)
	}
}

// ledgerCore is what the ledger asks of the controller.
type ledgerCore struct{ c *Controller }

var _ ledger.Core = ledgerCore{}

func (l ledgerCore) Entry(key policy.Key) *ledger.Entry { return l.c.states.Of(key).Ledger() }

func (l ledgerCore) Running(key policy.Key) bool {
	l.c.mu.RLock()
	defer l.c.mu.RUnlock()
	_, running := l.c.policies[key]
	return running
}

func (l ledgerCore) Queue(key policy.Key) { l.c.queue.Add(key) }

func (l ledgerCore) QueueGenerated(key policy.Key, obj any, d time.Duration) {
	l.c.intake.queueGenerated(key, obj, d)
}
