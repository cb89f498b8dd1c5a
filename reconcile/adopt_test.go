package reconcile_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// TestLabelsRemovedWhileStoppedAreWrittenBack: a tenant removes the labels
// of a synchronizing policy's objects while Sprout is stopped, as kubectl
// edit would (an update), and edits their content. Sprout never saw them
// leave, so nothing claims them; yet Sprout wrote them (its field manager's
// entry is in their managed fields), and the policy takes them back at
// start, labels and content. An object Sprout never wrote stays the
// tenant's.
func TestLabelsRemovedWhileStoppedAreWrittenBack(t *testing.T) {
	tb := newTable(t, "adopt")
	tb.applyPolicy(derivedPolicy("adopt-created", "adopt", "out", "one", true, false))
	tb.applyPolicy(derivedPolicy("adopt-applied", "adopt", "applied", "one", true, false))
	t.Cleanup(func() {
		tb.deletePolicy("adopt-created")
		tb.deletePolicy("adopt-applied")
	})
	tb.trigger("a", "adopt", "a1")
	tb.trigger("b", "adopt", "b1")
	both := []string{"GeneratingPolicy/adopt-created", "GeneratingPolicy/adopt-applied"}
	runUntilSynced(t, cfg, both...)
	// A new desired state hands the create's fields to Sprout's Apply
	// entry: a-applied is then held by an apply alone, a-out by a create.
	tb.applyPolicy(derivedPolicy("adopt-applied", "adopt", "applied", "two", true, false))
	runUntilSynced(t, cfg, both...)
	if m := sproutEntries(tb.get("a-applied")); !slices.Equal(m, []string{"Apply"}) {
		t.Fatalf("a-applied: Sprout's managed-fields entries are %v, want an Apply entry alone", m)
	}
	if m := sproutEntries(tb.get("a-out")); !slices.Equal(m, []string{"Update"}) {
		t.Fatalf("a-out: Sprout's managed-fields entries are %v, want its create's Update entry alone", m)
	}

	// While stopped.
	unlabel := func(name string, labels ...string) {
		t.Helper()
		cm := tb.get(name)
		if len(labels) == 0 {
			cm.Labels, cm.Annotations = nil, nil
		}
		for _, l := range labels {
			delete(cm.Labels, l)
		}
		cm.Data["policy"] = "allow-all"
		if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Update(context.Background(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
	}
	unlabel("a-out")
	unlabel("a-applied")
	// Still labelled managed-by, so still in Sprout's cache, but no longer
	// naming its policy.
	unlabel("b-out", sproutv1alpha1.LabelPolicyName)
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c-out", Namespace: tb.ns}, Data: map[string]string{"policy": "mine"}}
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), own, metav1.CreateOptions{FieldManager: "tenant"}); err != nil {
		t.Fatal(err)
	}
	tb.trigger("c", "adopt", "c1")

	runUntilSynced(t, cfg, both...)
	for name, want := range map[string][2]string{
		"a-out": {"adopt-created", "one"}, "a-applied": {"adopt-applied", "two"}, "b-out": {"adopt-created", "one"},
	} {
		if cm := tb.get(name); !restored(want[0], want[1])(cm) {
			t.Errorf("%s was not written back after the restart: labels %v, data %v", name, cm.Labels, cm.Data)
		} else if cm.Annotations[sproutv1alpha1.AnnotationPolicy] != "GeneratingPolicy/"+want[0] {
			t.Errorf("%s: annotations %v, want its policy's", name, cm.Annotations)
		}
	}
	if cm := tb.get("c-out"); cm.Data["policy"] != "mine" || len(cm.Labels) != 0 {
		t.Errorf("an object Sprout never wrote was taken over: labels %v, data %v", cm.Labels, cm.Data)
	}
}

// sproutEntries lists the operations of cm's managed-fields entries of
// Sprout's field manager.
func sproutEntries(cm *corev1.ConfigMap) []string {
	ops := map[string]bool{}
	for _, e := range cm.ManagedFields {
		if e.Manager == sproutv1alpha1.FieldManager {
			ops[string(e.Operation)] = true
		}
	}
	return slices.Sorted(maps.Keys(ops))
}
