package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestSwitchingSyncOffStopsCloneRepairs: as for data, a clone policy whose
// synchronize is switched off keeps its clones and repairs them no more: a
// clone deleted afterwards stays deleted.
func TestSwitchingSyncOffStopsCloneRepairs(t *testing.T) {
	startController(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createNamespace(t, "clone-switch-src", nil)
	if _, err := kube.CoreV1().Secrets("clone-switch-src").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main"},
		Data: map[string][]byte{"v": []byte("1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb := newTable(t, "clone-switch")
	tb.applyPolicy(clonePolicy("clone-switch", "clone-switch", "clone-switch-src", true))
	t.Cleanup(func() { tb.deletePolicy("clone-switch") })
	tb.trigger("a", "clone-switch", "a1")
	clone := func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Secrets("clone-switch").Get(ctx, "main", metav1.GetOptions{})
		return err == nil, notFoundIsNil(err)
	}
	poll(t, "the clone", clone)

	tb.applyPolicy(clonePolicy("clone-switch", "clone-switch", "clone-switch-src", false))
	tb.observed("clone-switch")
	if err := kube.CoreV1().Secrets("clone-switch").Delete(ctx, "main", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A change of the source, which a synchronizing policy would follow.
	if _, err := kube.CoreV1().Secrets("clone-switch-src").Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main"},
		Data: map[string][]byte{"v": []byte("2")}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.trigger("a", "clone-switch", "a2") // and an UPDATE of the trigger
	// A new trigger in another namespace: once it has its clone, the
	// policy has synced since the deletion.
	other := newTable(t, "clone-switch-2")
	other.trigger("b", "clone-switch", "b1")
	poll(t, "the new trigger's clone", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Secrets("clone-switch-2").Get(ctx, "main", metav1.GetOptions{})
		return err == nil, notFoundIsNil(err)
	})
	if ok, _ := clone(ctx); ok {
		t.Error("a deleted clone was generated again after synchronize was switched off")
	}
}
