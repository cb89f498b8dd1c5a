package reconcile_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// bombPolicy is testpolicies/self-trigger.yaml: for every ConfigMap
// labelled app=<app>, a ConfigMap "bomb-<name>" labelled app=<app> too: its
// objects match its own rules.
func bombPolicy(name, app string) string {
	return fixtures.MustPolicyFile("self-trigger", fixtures.Params{Name: name, App: app})
}

// TestPolicyDoesNotTriggerOnItsOwnObjects: a policy whose objects match
// its own triggers generates one generation and stops, and says why on an
// Event, even when it does not skip background requests; another policy
// may still take them as triggers when it does not skip them
// (skipBackgroundRequests: false).
func TestPolicyDoesNotTriggerOnItsOwnObjects(t *testing.T) {
	startController(t)
	tb := newTable(t, "bomb")
	tb.applyPolicy(notSkippingBackground(bombPolicy("bomb", "bomb")))
	tb.applyPolicy(notSkippingBackground(derivedPolicy("bomb-watcher", "bomb", "seen", "one", true, false)))
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

// notSkippingBackground sets skipBackgroundRequests: false in a policy of
// testpolicies/: it triggers on what generating policies generated.
func notSkippingBackground(doc string) string {
	return strings.Replace(doc, "  evaluation:\n", "  evaluation:\n    skipBackgroundRequests: false\n", 1)
}

// TestForgedOriginDoesNotExemptATrigger: a tenant who gives their trigger
// the labels and annotation of a policy's own objects does not take it out
// of the policy: only objects the policy wrote are passed over.
func TestForgedOriginDoesNotExemptATrigger(t *testing.T) {
	startController(t)
	tb := newTable(t, "forged")
	tb.applyPolicy(derivedPolicy("forged", "forged", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("forged") })
	// The annotation names the policy exactly; with managed-by too, the
	// trigger would also pass for one of the policy's objects to prune
	// (docs/security.md, what is not bounded yet).
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: tb.ns,
		Labels:      map[string]string{"app": "forged", "generate.kyverno.io/policy-name": "forged"},
		Annotations: map[string]string{"sprout.dev/policy": "GeneratingPolicy/forged"},
	}, Data: map[string]string{"value": "v"}}
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the forged trigger's object", "mine-out", exists)
}
