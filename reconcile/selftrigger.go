package reconcile

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// An object a policy generated is never a trigger of that same policy
// (ledger.LabelledBy, ledger.Entry.GeneratedBy); a sync tells how many of
// its own objects it passed over.

// ReasonSelfTrigger is the reason of the Event that tells that objects a
// policy generated match its own rules, and are not its triggers.
const ReasonSelfTrigger = "SelfTrigger"

// reportSelfTriggers tells, in the log and with an Event on the policy,
// how many of its own objects a sync of it passed over as triggers, each
// time that count changes.
func (m *triggerMatcher) reportSelfTriggers(key policy.Key, cp *policy.Compiled, n int) {
	if !m.states.Of(key).Ledger().PassedOver(n) || n == 0 || m.dryRun {
		return
	}
	msg := fmt.Sprintf("%d objects this policy generated match its own rules: they are not its triggers, so it does not generate from what it generated", n)
	m.log.Info("objects a policy generated are not its triggers", "policy", key.String(), "objects", n)
	if ref := m.tell.Reference(key, cp); ref != nil {
		m.tell.Event(ref, corev1.EventTypeWarning, ReasonSelfTrigger, msg)
	}
}
