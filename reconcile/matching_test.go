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
