package reconcile_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// syncCounter counts the syncs of one policy.
func syncCounter(policy string, n *atomic.Int64) func(*reconcile.Options) {
	return func(o *reconcile.Options) {
		o.ResyncSchedule = ""
		o.OnSync = func(p string, _ error) {
			if p == policy {
				n.Add(1)
			}
		}
	}
}

// TestSuspendedPolicyWritesAndPrunesNothing: a policy annotated
// sprout.dev/suspend: "true" says so in its status and, while suspended,
// generates nothing for a new trigger and prunes nothing for a deleted one;
// resumed, it catches up; deleted while suspended, it leaves its objects.
func TestSuspendedPolicyWritesAndPrunesNothing(t *testing.T) {
	var syncs atomic.Int64
	runController(t, syncCounter("GeneratingPolicy/suspend", &syncs))
	tb := newTable(t, "suspend")
	tb.applyPolicy(derivedPolicy("suspend", "suspend", "out", "one", true, false))
	tb.trigger("a", "suspend", "a1")
	tb.waitFor("the policy's object", "a-out", exists)

	suspend := fmt.Sprintf(`{"metadata": {"annotations": {%q: "true"}}}`, reconcile.AnnotationSuspend)
	patchPolicy(t, "suspend", suspend)
	poll(t, "Suspended on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "suspend")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reconcile.ReasonSuspended, err
	})
	// Each change queues the policy once: the sync after it has seen it.
	afterSync := func(what string, change func()) {
		t.Helper()
		n := syncs.Load()
		change()
		poll(t, "a sync after "+what, func(context.Context) (bool, error) { return syncs.Load() > n, nil })
	}
	afterSync("a new trigger", func() { tb.trigger("b", "suspend", "b1") })
	if tb.get("b-out") != nil {
		t.Error("a suspended policy generated for a new trigger")
	}
	afterSync("a deleted trigger", func() { tb.delete("a") })
	if tb.get("a-out") == nil {
		t.Error("a suspended policy pruned the object of a deleted trigger")
	}

	patchPolicy(t, "suspend", fmt.Sprintf(`{"metadata": {"annotations": {%q: null}}}`, reconcile.AnnotationSuspend))
	tb.waitFor("the new trigger's object once resumed", "b-out", exists)
	tb.waitFor("the deleted trigger's object pruned once resumed", "a-out", absent)
	waitReady(t, "suspend")

	patchPolicy(t, "suspend", suspend)
	poll(t, "Suspended again", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "suspend")
		return c != nil && c.Reason == reconcile.ReasonSuspended, err
	})
	tb.deletePolicy("suspend")
	poll(t, "the deleted policy's record to go", func(ctx context.Context) (bool, error) {
		_, err := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories).Get(ctx, "gpol.suspend", metav1.GetOptions{})
		return apierrors.IsNotFound(err), notFoundIsNil(err)
	})
	if tb.get("b-out") == nil {
		t.Error("a policy deleted while suspended pruned its objects")
	}
}

// TestReconcileNowRepairsDriftBeforeAnyResync: an object in the policy's
// way that is not Sprout's is not watched, so its deletion queues nothing;
// a new reconcile.fluxcd.io/requestedAt makes the policy sync at once,
// write its object, and record the request as handled.
func TestReconcileNowRepairsDriftBeforeAnyResync(t *testing.T) {
	runController(t, func(o *reconcile.Options) { o.ResyncSchedule = "" })
	tb := newTable(t, "now")
	ctx := context.Background()
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a-out", Namespace: tb.ns}, Data: map[string]string{"owner": "someone"}}
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The trigger a Secret: an event of any ConfigMap would queue a policy
	// whose triggers are ConfigMaps.
	tb.applyPolicy(replaceOnce(t, derivedPolicy("now", "now", "out", "one", true, false), `resources: ["configmaps"]`, `resources: ["secrets"]`))
	t.Cleanup(func() { tb.deletePolicy("now") })
	trigger := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: tb.ns, Labels: map[string]string{"app": "now"}}, StringData: map[string]string{"value": "a1"}}
	if _, err := tb.kube.CoreV1().Secrets(tb.ns).Create(ctx, trigger, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "NotOwned on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "now")
		return c != nil && c.Reason == reconcile.ReasonNotOwned, err
	})
	tb.delete("a-out")

	patchPolicy(t, "now", fmt.Sprintf(`{"metadata": {"annotations": {%q: "2026-11-26T00:00:00Z"}}}`, reconcile.AnnotationReconcileRequest))
	tb.waitFor("the policy's own object", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["policy"] == "one" })
	poll(t, "the request handled on the record", func(ctx context.Context) (bool, error) {
		rec, err := recordOf(ctx, "gpol.now")
		return rec != nil && rec.Status.LastHandledReconcileAt == "2026-11-26T00:00:00Z", err
	})
	waitReady(t, "now")
}

// recordOf reads PolicyInventory name; nil when there is none.
func recordOf(ctx context.Context, name string) (*sproutv1alpha1.PolicyInventory, error) {
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, notFoundIsNil(err)
	}
	rec := &sproutv1alpha1.PolicyInventory{}
	return rec, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rec)
}
