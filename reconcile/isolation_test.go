package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestAFailingTriggerHarmsNoOther: a trigger whose evaluation fails keeps
// its objects as they are, neither pruned nor rewritten; the policy's
// other triggers are generated and pruned as usual; the failure is counted
// in the status, and Kyverno's conditionStatus.ready stays true.
func TestAFailingTriggerHarmsNoOther(t *testing.T) {
	startController(t)
	tb := newTable(t, "isolation")
	// object.data.value is read without `?`: a trigger without it fails.
	doc := replaceOnce(t, derivedPolicy("isolation", "iso", "out", "one", true, false), `object.data.?value.orValue("")`, `object.data.value`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("isolation") })
	tb.trigger("a", "iso", "a1")
	tb.trigger("b", "iso", "b1")
	tb.waitFor("a's downstream", "a-out", exists)
	tb.waitFor("b's downstream", "b-out", exists)

	// b fails from now on; a goes.
	patch := []byte(`[{"op": "remove", "path": "/data/value"}]`)
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Patch(context.Background(), "b", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.delete("a")
	tb.waitFor("a's downstream pruned while b fails", "a-out", func(cm *corev1.ConfigMap) bool { return cm == nil })
	if cm := tb.get("b-out"); cm == nil || cm.Data["from"] != "b1" {
		t.Fatalf("the failing trigger's downstream was not kept as it was: %v", cm)
	}
	poll(t, "the failure counted, conditionStatus.ready still true", func(ctx context.Context) (bool, error) {
		failed, ready, err := failures(ctx, "isolation")
		return failed == 1 && ready, err
	})

	// b evaluates again: its downstream follows it, and nothing is failing.
	tb.trigger("b", "iso", "b2")
	tb.waitFor("b's downstream to follow it again", "b-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["from"] == "b2" })
	poll(t, "no failure counted", func(ctx context.Context) (bool, error) {
		failed, ready, err := failures(ctx, "isolation")
		return failed == 0 && ready, err
	})
}

// failures returns how many triggers of a policy failed, from
// status.failedTriggers or, under Kyverno's CRDs, which drop it, from the
// message of the Ready condition in conditionStatus; and
// conditionStatus.ready.
func failures(ctx context.Context, name string) (int, bool, error) {
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, false, err
	}
	ready, _, _ := unstructured.NestedBool(u.Object, "status", "conditionStatus", "ready")
	if n, found, _ := unstructured.NestedInt64(u.Object, "status", "failedTriggers"); found {
		return int(n), ready, nil
	}
	p, err := apiv1.FromUnstructured(u)
	if err != nil {
		return 0, false, err
	}
	c := meta.FindStatusCondition(p.PolicyStatus().ConditionStatus.Conditions, reconcile.ConditionReady)
	n := 0
	if c != nil && strings.Contains(c.Message, " of its triggers failed") {
		if _, err := fmt.Sscanf(c.Message, "%d of its triggers failed", &n); err != nil {
			return 0, false, err
		}
	}
	return n, ready, nil
}
