package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// restored reports whether a downstream of derivedPolicy carries its
// labels and its value again.
func restored(policy, value string) func(*corev1.ConfigMap) bool {
	return func(cm *corev1.ConfigMap) bool {
		return cm != nil && cm.Labels[sproutv1alpha1.LabelManagedBy] == sproutv1alpha1.ManagedBy &&
			cm.Labels[sproutv1alpha1.LabelPolicyName] == policy && cm.Data["policy"] == value
	}
}

// TestRemovedLabelsDoNotTurnSynchronizationOff: anyone who may edit a
// generated object may edit its labels. Removing or changing the labels
// that say it is Sprout's, and then its content, must not make a
// synchronizing policy leave it alone: the policy claims what it generated,
// and writes it back, labels and content.
func TestRemovedLabelsDoNotTurnSynchronizationOff(t *testing.T) {
	startController(t)
	tb := newTable(t, "unlabel")
	tb.applyPolicy(derivedPolicy("unlabel-sync", "unlabel", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("unlabel-sync") })
	tb.trigger("a", "unlabel", "a1")
	first := tb.waitFor("the downstream", "a-out", exists)
	tenant := func(name, patch string) {
		t.Helper()
		_, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "tenant"})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("managed-by removed, content edited", func(t *testing.T) {
		tenant("a-out", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}},"data":{"policy":"allow-all"}}`)
		cm := tb.waitFor("labels and content back", "a-out", restored("unlabel-sync", "one"))
		if cm.UID != first.UID {
			t.Errorf("the object was recreated, want it written back in place")
		}
	})
	t.Run("policy label changed, content edited", func(t *testing.T) {
		tenant("a-out", `{"metadata":{"labels":{"generate.kyverno.io/policy-name":"someone-else"}},"data":{"policy":"allow-all"}}`)
		tb.waitFor("labels and content back", "a-out", restored("unlabel-sync", "one"))
	})
	t.Run("every origin label and annotation removed", func(t *testing.T) {
		tenant("a-out", `{"metadata":{"labels":null,"annotations":null},"data":{"policy":"allow-all"}}`)
		tb.waitFor("labels and content back", "a-out", restored("unlabel-sync", "one"))
	})
	t.Run("deleted and created again by the tenant", func(t *testing.T) {
		tb.delete("a-out")
		own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a-out", Namespace: tb.ns}, Data: map[string]string{"policy": "allow-all"}}
		if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), own, metav1.CreateOptions{FieldManager: "tenant"}); err != nil {
			// Sprout was first: the tenant's own then replaces it in place.
			tenant("a-out", `{"metadata":{"labels":null},"data":{"policy":"allow-all"}}`)
		}
		tb.waitFor("labels and content back", "a-out", restored("unlabel-sync", "one"))
	})
	t.Run("an object that was never the policy's is still left alone", func(t *testing.T) {
		own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b-out", Namespace: tb.ns}, Data: map[string]string{"policy": "mine"}}
		if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), own, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tb.trigger("b", "unlabel", "b1")
		tb.settle("unlabel", 1)
		if cm := tb.get("b-out"); cm.Data["policy"] != "mine" || cm.Labels[sproutv1alpha1.LabelManagedBy] != "" {
			t.Errorf("an object that existed before its trigger was taken over: %v %v", cm.Labels, cm.Data)
		}
	})
}
