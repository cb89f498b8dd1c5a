package reconcile_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCreatedAsDesiredQueuesNoConfirmation: the watch event of an object a
// sync created as desired queues no sync: the cache holds the version
// created, and the trigger's next sync adopts it. Only a first sighting at
// another version (an edit the cache never showed) queues one. At 100,000
// triggers, confirming each create cost a second sync of every trigger
// after the cold generation.
func TestCreatedAsDesiredQueuesNoConfirmation(t *testing.T) {
	_, c := runController(t, nil)
	tb := newTable(t, "confirm")
	tb.applyPolicy(derivedPolicy("confirm", "confirm", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("confirm") })
	tb.trigger("a", "confirm", "a1")
	tb.waitFor("the downstream", "a-out", exists)
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	poll(t, "the created version cached released", func(context.Context) (bool, error) {
		cached, released := c.CachedRelease(configMaps, "confirm", "a-out")
		return cached && released, nil
	})

	// A generated object of another policy's, first seen at a version no
	// create of this controller made, is looked at again (confirmed),
	// after a-out's sighting was looked at (an earlier look, or the same).
	looks := c.ConfirmationLooks()
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker", Namespace: "confirm",
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "sprout", "generate.kyverno.io/trigger-uid": "marker-uid"},
		Annotations: map[string]string{"sprout.dev/policy": "GeneratingPolicy/confirm-marker"},
	}}
	if _, err := tb.kube.CoreV1().ConfigMaps("confirm").Create(context.Background(), marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the marker looked at again", func(context.Context) (bool, error) {
		return c.ConfirmationLooks() > looks, nil
	})
	trigger, err := tb.kube.CoreV1().ConfigMaps("confirm").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(c.Dirty("GeneratingPolicy/confirm"), trigger.UID) {
		t.Error("the event of the version created as desired queued its trigger's sync again")
	}
}
