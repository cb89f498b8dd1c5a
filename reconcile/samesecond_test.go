package reconcile_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// TestTriggerOfThePolicysSecondButBeforeIt: with generateExisting off, a
// trigger created just before the policy, in the same second, is not
// generated for, as Kyverno's webhook would not have seen it; one created
// just after, in that second too, is. Timestamps of one second cannot
// tell the two apart; the versions the API server gave them can. Before,
// both were generated for.
func TestTriggerOfThePolicysSecondButBeforeIt(t *testing.T) {
	_, c := runController(t, nil)
	tb := newTable(t, "same-second")
	policies := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies)
	var name string
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			t.Fatal("no triggers and policy created in the same second in 10 tries")
		}
		name = fmt.Sprintf("second-%d", attempt)
		tb.trigger(name+"-before", name, "b")
		tb.applyPolicy(derivedPolicy(name, name, "out", "one", true, false))
		tb.trigger(name+"-after", name, "a")
		p, err := policies.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created := p.GetCreationTimestamp().Unix()
		if tb.get(name+"-before").CreationTimestamp.Unix() == created && tb.get(name+"-after").CreationTimestamp.Unix() == created {
			t.Cleanup(func() { tb.deletePolicy(name) })
			break
		}
		tb.deletePolicy(name)
	}
	tb.waitFor("the trigger created after the policy generated for", name+"-after-out", exists)
	poll(t, "the policy idle", func(context.Context) (bool, error) { return c.SyncsIdle(), nil })
	if cm, err := getConfigMap(context.Background(), tb.ns, name+"-before-out"); err != nil || cm != nil {
		t.Errorf("the trigger created before the policy, in its second, was generated for: %v, %v", cm != nil, err)
	}
}
