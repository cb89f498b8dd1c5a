package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAFalseMatchConditionSkipsATriggerAnotherFailsOn: as in admission, a
// trigger for which one matchCondition is false is skipped, even when
// another fails on it; the failure is not the policy's error.
func TestAFalseMatchConditionSkipsATriggerAnotherFailsOn(t *testing.T) {
	startController(t)
	tb := newTable(t, "match-conditions")
	doc := replaceOnce(t, derivedPolicy("match-conditions", "mc", "out", "one", true, false), "  generate:\n", `  matchConditions:
  - name: has-team
    expression: "object.data.team != ''"
  - name: wanted
    expression: "object.data.?want.orValue('') == 'yes'"
  generate:
`)
	// The triggers come first: the policy's first sync sees them both, so
	// its first Ready is about them.
	for name, data := range map[string]map[string]string{
		"unwanted": {"value": "x"}, // has-team fails, wanted is false
		"wanted":   {"value": "y", "team": "a", "want": "yes"},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tb.ns, Labels: map[string]string{"app": "mc"}}, Data: data}
		if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tb.applyPolicy(generatingExisting(doc))
	t.Cleanup(func() { tb.deletePolicy("match-conditions") })
	tb.waitFor("the wanted trigger's downstream", "wanted-out", exists)
	var last *metav1.Condition
	poll(t, "the policy Ready with no error", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "match-conditions")
		last = c
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration > 0, err
	})
	if tb.get("unwanted-out") != nil {
		t.Error("a trigger a matchCondition rejects was generated for")
	}
	t.Logf("Ready: %s", last.Message)
}

// TestAnExclusionScopedToDeleteExcludesOnlyDeletes: an excludeResourceRules
// entry limited to DELETE keeps the policy from generating on a delete; it
// does not exclude the trigger while it lives.
func TestAnExclusionScopedToDeleteExcludesOnlyDeletes(t *testing.T) {
	startController(t)
	tb := newTable(t, "exclude-delete")
	doc := replaceOnce(t, derivedPolicy("exclude-delete", "xd", "out", "one", true, false), "    objectSelector:\n", `    excludeResourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["DELETE"]
      resources: ["configmaps"]
    objectSelector:
`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("exclude-delete") })
	tb.trigger("a", "xd", "a1")
	tb.waitFor("the downstream of a trigger only its deletes are excluded for", "a-out", exists)
	tb.trigger("a", "xd", "a2")
	tb.waitFor("the downstream to follow its trigger", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["from"] == "a2" })
}
