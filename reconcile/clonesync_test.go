package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// suspendedDoc adds the suspend annotation to a policy document.
func suspendedDoc(t *testing.T, doc, name string) string {
	return replaceOnce(t, doc, "  name: "+name+"\n", "  name: "+name+"\n  annotations: {"+reconcile.AnnotationSuspend+`: "true"}`+"\n")
}

// switchSyncOffSuspended applies doc, a policy's synchronize switched off,
// suspended, and waits until Sprout reports the new generation suspended:
// it took the switch and has run no sync without synchronize yet.
func switchSyncOffSuspended(t *testing.T, tb *table, doc, name string) {
	t.Helper()
	tb.applyPolicy(suspendedDoc(t, doc, name))
	policies := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies)
	poll(t, "the switched policy suspended", func(ctx context.Context) (bool, error) {
		u, err := policies.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, notFoundIsNil(err)
		}
		p, err := apiv1.FromUnstructured(u)
		if err != nil {
			return false, err
		}
		c := readyOf(p)
		return c != nil && c.Reason == reconcile.ReasonSuspended && c.ObservedGeneration == u.GetGeneration(), nil
	})
}

// TestSwitchingSyncOffStopsCloneRepairs: a clone policy whose synchronize
// is switched off keeps its clones and repairs them no more: a clone
// deleted afterwards stays deleted, also when it is deleted before the
// first sync without synchronize (here the policy is suspended until
// then), after a source change and an UPDATE of its trigger too. That
// sync found the clone missing and, having no record of it, created it.
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
	clone := func(ns string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().Secrets(ns).Get(ctx, "main", metav1.GetOptions{})
			return err == nil, notFoundIsNil(err)
		}
	}
	poll(t, "the clone", clone("clone-switch"))

	off := clonePolicy("clone-switch", "clone-switch", "clone-switch-src", false)
	switchSyncOffSuspended(t, tb, off, "clone-switch")
	if err := kube.CoreV1().Secrets("clone-switch").Delete(ctx, "main", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.applyPolicy(off) // resumed
	// A change of the source, which a synchronizing policy would follow.
	if _, err := kube.CoreV1().Secrets("clone-switch-src").Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main"},
		Data: map[string][]byte{"v": []byte("2")}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.trigger("a", "clone-switch", "a2") // and an UPDATE of the trigger
	// A new trigger in another namespace: once it has its clone, the
	// policy has synced since.
	other := newTable(t, "clone-switch-2")
	other.trigger("b", "clone-switch", "b1")
	poll(t, "the new trigger's clone", clone("clone-switch-2"))
	if ok, _ := clone("clone-switch")(ctx); ok {
		t.Error("a deleted clone was generated again after synchronize was switched off")
	}
}

// TestSwitchingSyncOffStopsRepairsBeforeItsFirstSync: the same for data: an
// object deleted after the switch and before the policy's first sync
// without synchronize stays deleted.
func TestSwitchingSyncOffStopsRepairsBeforeItsFirstSync(t *testing.T) {
	startController(t)
	tb := newTable(t, "sync-switch-first")
	tb.applyPolicy(derivedPolicy("sync-switch-first", "sync-switch-first", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("sync-switch-first") })
	tb.trigger("a", "sync-switch-first", "a1")
	tb.waitFor("the downstream", "a-out", exists)

	off := derivedPolicy("sync-switch-first", "sync-switch-first", "out", "one", false, false)
	switchSyncOffSuspended(t, tb, off, "sync-switch-first")
	tb.delete("a-out")
	tb.applyPolicy(off) // resumed
	tb.settle("sync-switch-first", 1)
	if tb.get("a-out") != nil {
		t.Error("a downstream deleted before the first sync without synchronize was generated again")
	}
}
