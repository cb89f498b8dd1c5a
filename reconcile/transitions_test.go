package reconcile_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Changes to a running policy's settings (docs/sync.md lists which test
// covers each transition).

// TestSwitchingSyncOnRepairs: once synchronize is switched on, the policy's
// objects follow it again: one deleted or left behind its trigger while
// sync was off is generated again as the trigger now wants it, without
// waiting for an event.
func TestSwitchingSyncOnRepairs(t *testing.T) {
	startController(t)
	tb := newTable(t, "sync-on-switch")
	tb.applyPolicy(derivedPolicy("sync-on-switch", "sync-on-switch", "out", "one", false, false))
	t.Cleanup(func() { tb.deletePolicy("sync-on-switch") })
	tb.trigger("a", "sync-on-switch", "a1")
	tb.trigger("b", "sync-on-switch", "b1")
	tb.waitFor("a's downstream", "a-out", exists)
	tb.waitFor("b's downstream", "b-out", exists)
	tb.delete("a-out")
	tb.trigger("b", "sync-on-switch", "b2")
	tb.settle("sync-on-switch", 1)
	if tb.get("a-out") != nil || tb.get("b-out").Data["from"] != "b1" {
		t.Fatal("a policy without synchronize repaired or updated its downstreams")
	}

	tb.applyPolicy(derivedPolicy("sync-on-switch", "sync-on-switch", "out", "one", true, false))
	tb.waitFor("a's downstream to come back", "a-out", exists)
	tb.waitFor("b's downstream to follow its trigger", "b-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["from"] == "b2" })
	tb.edit("b-out", "policy", "tampered")
	tb.waitFor("the edit to be reverted", "b-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["policy"] == "one" })
}

// TestSwitchingGenerateExisting: switched on, generateExisting generates
// for the triggers that predate the policy; switched off again, what it
// generated stays, synchronized, while its trigger exists.
func TestSwitchingGenerateExisting(t *testing.T) {
	startController(t)
	tb := newTable(t, "gex-switch")
	tb.trigger("old", "gex-switch", "o1")
	waitForNextSecond(t, tb.get("old").CreationTimestamp.Time)
	doc := derivedPolicy("gex-switch", "gex-switch", "out", "one", true, false)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("gex-switch") })
	tb.settle("gex-switch", 1)
	if tb.get("old-out") != nil {
		t.Fatal("a trigger older than the policy was generated without generateExisting")
	}

	tb.applyPolicy(generatingExisting(doc))
	tb.waitFor("the existing trigger's downstream", "old-out", exists)

	tb.applyPolicy(doc)
	tb.observed("gex-switch")
	tb.settle("gex-switch", 2)
	if tb.get("old-out") == nil {
		t.Fatal("switching generateExisting off pruned what it generated")
	}
	tb.trigger("old", "gex-switch", "o2")
	tb.waitFor("the existing trigger's downstream to follow it", "old-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["from"] == "o2" })
}

// TestSwitchingOrphan: orphanDownstreamOnPolicyDelete counts as it is when
// the policy is deleted, whatever it was before.
func TestSwitchingOrphan(t *testing.T) {
	startController(t)
	for _, c := range []struct {
		ns           string
		before, last bool
	}{{"orphan-on-off", true, false}, {"orphan-off-on", false, true}} {
		tb := newTable(t, c.ns)
		tb.applyPolicy(derivedPolicy(c.ns, c.ns, "out", "one", true, c.before))
		tb.trigger("a", c.ns, "a1")
		tb.waitFor("the downstream", "a-out", exists)
		tb.applyPolicy(derivedPolicy(c.ns, c.ns, "out", "one", true, c.last))
		tb.observed(c.ns)
		tb.deletePolicy(c.ns)
		if !c.last {
			tb.waitFor("the downstream to go with its policy", "a-out", absent)
			continue
		}
		tb.settleWith(derivedPolicy(c.ns+"-marker", c.ns, "marker", "one", true, false), "a-marker")
		t.Cleanup(func() { tb.deletePolicy(c.ns + "-marker") })
		if tb.get("a-out") == nil {
			t.Errorf("%s: orphanDownstreamOnPolicyDelete switched on, the downstream went with its policy", c.ns)
		}
	}
}

// TestChangingMatchRules: a synchronizing policy whose match rules stop
// selecting a trigger prunes its objects; a trigger the new rules select
// that predates the policy is generated for at its next event, as an
// admission webhook would.
func TestChangingMatchRules(t *testing.T) {
	startController(t)
	tb := newTable(t, "match-switch")
	tb.trigger("y", "match-y", "y1") // selected by the new rules only
	waitForNextSecond(t, tb.get("y").CreationTimestamp.Time)
	tb.applyPolicy(derivedPolicy("match-switch", "match-x", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("match-switch") })
	tb.trigger("x", "match-x", "x1")
	tb.waitFor("x's downstream", "x-out", exists)

	tb.applyPolicy(derivedPolicy("match-switch", "match-y", "out", "one", true, false))
	tb.waitFor("x's downstream to be pruned", "x-out", absent)
	tb.settle("match-y", 1)
	if tb.get("y-out") != nil {
		t.Fatal("a trigger older than the policy was generated without an event or generateExisting")
	}
	tb.trigger("y", "match-y", "y2")
	tb.waitFor("y's downstream after its update", "y-out", exists)
}
