package reconcile_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sprout-gitops/sprout/reconcile"
)

// bombPolicy generates, for every ConfigMap labelled app=<app>, a
// ConfigMap "bomb-<name>" labelled app=<app> too: its objects match its
// own rules.
func bombPolicy(name, app string) string {
	return `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: ` + name + `
spec:
  evaluation:
    synchronize: {enabled: true}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
    objectSelector:
      matchLabels: {app: ` + app + `}
  generate:
  - expression: >-
      generator.Apply(object.metadata.namespace, [{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bomb-" + object.metadata.name, "labels": {"app": "` + app + `"}},
        "data": {"from": object.metadata.name}
      }])
`
}

// TestPolicyDoesNotTriggerOnItsOwnObjects: a policy whose objects match
// its own triggers generates one generation and stops, and says why on an
// Event; another policy may still take them as triggers.
func TestPolicyDoesNotTriggerOnItsOwnObjects(t *testing.T) {
	startController(t)
	tb := newTable(t, "bomb")
	tb.applyPolicy(bombPolicy("bomb", "bomb"))
	tb.applyPolicy(derivedPolicy("bomb-watcher", "bomb", "seen", "one", true, false))
	t.Cleanup(func() {
		tb.deletePolicy("bomb")
		tb.deletePolicy("bomb-watcher")
	})
	tb.trigger("boom-1", "bomb", "x")
	tb.waitFor("the first generation", "bomb-boom-1", exists)
	poll(t, "the policy to tell that its own objects are not its triggers", func(ctx context.Context) (bool, error) {
		return eventCount(eventsOn(ctx, t, "default", "GeneratingPolicy", "bomb"), reconcile.ReasonSelfTrigger) > 0, nil
	})
	// The event comes from a sync that saw bomb-boom-1 among the
	// ConfigMaps; a marker synced after it settles the question.
	tb.trigger("boom-2", "bomb", "x")
	tb.waitFor("a later generation", "bomb-boom-2", exists)
	list, err := tb.kube.CoreV1().ConfigMaps(tb.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tb.waitFor("another policy to take the policy's object as a trigger", "bomb-boom-1-seen", exists)
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "bomb-bomb-") {
			t.Errorf("%s was generated from the policy's own object", cm.Name)
		}
	}
}
