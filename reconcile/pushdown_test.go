package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/reconcile"
)

// cachedTriggers reads how many objects the trigger informer of resource
// with selector holds; -1 when no such informer runs.
func cachedTriggers(t *testing.T, reg *prometheus.Registry, resource, selector string) float64 {
	t.Helper()
	return metricValue(t, reg, "sprout_informer_objects", map[string]string{"kind": "trigger", "resource": resource, "selector": selector})
}

// waitCached waits until the trigger informer of selector holds n objects.
func waitCached(t *testing.T, reg *prometheus.Registry, selector string, n float64) {
	t.Helper()
	poll(t, "the informer of "+selector+" holding the objects it selects", func(context.Context) (bool, error) {
		return cachedTriggers(t, reg, "configmaps.v1", selector) == n, nil
	})
}

// plain creates a ConfigMap that no policy of these tests selects.
func (tb *table) plain(name string) {
	tb.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tb.ns}, Data: map[string]string{"value": name}}
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		tb.t.Fatal(err)
	}
}

// existing creates a ConfigMap that no policy selects, then waits for the
// next second: creation times are whole seconds, and a trigger created in
// a policy's second counts as created after it.
func (tb *table) existing(name string) {
	tb.t.Helper()
	tb.plain(name)
	created := tb.get(name).CreationTimestamp.Time
	poll(tb.t, "a second after "+name+" was created", func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(created), nil
	})
}

// TestTriggerInformerHoldsOnlySelected: a synchronizing policy's
// objectSelector goes into its trigger informer's list and watch, so its
// cache holds the ConfigMaps it selects, not the others nor its own
// copies; a ConfigMap labelled into the selection is admitted by that
// change and generates, one labelled out loses its downstream.
func TestTriggerInformerHoldsOnlySelected(t *testing.T) {
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) { o.Metrics = reg })
	tb := newTable(t, "pd-cache")
	tb.existing("old") // before the policy: only an event admits it
	tb.applyPolicy(derivedPolicy("pd-cache", "pd-cache", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("pd-cache") })
	tb.plain("other")
	tb.trigger("a", "pd-cache", "a1")
	tb.trigger("b", "pd-cache", "b1")
	tb.waitFor("a's downstream", "a-out", exists)
	tb.waitFor("b's downstream", "b-out", exists)
	waitCached(t, reg, "app=pd-cache", 2)

	tb.trigger("old", "pd-cache", "o1") // labelled in
	tb.waitFor("the downstream of the ConfigMap labelled in", "old-out", exists)
	waitCached(t, reg, "app=pd-cache", 3)

	tb.trigger("a", "elsewhere", "a1") // labelled out
	tb.waitFor("the downstream of the ConfigMap labelled out to be pruned", "a-out", absent)
	waitCached(t, reg, "app=pd-cache", 2)
	if tb.get("b-out") == nil || tb.get("old-out") == nil {
		t.Error("a ConfigMap labelled out took the others' downstreams with it")
	}
}

// TestUnsynchronizedPolicyWatchesEveryObject: a policy that does not
// synchronize remembers what it generated while its trigger exists, which
// a filtered cache cannot tell: its informer holds every ConfigMap, and a
// trigger labelled out keeps its downstream.
func TestUnsynchronizedPolicyWatchesEveryObject(t *testing.T) {
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) { o.Metrics = reg })
	tb := newTable(t, "pd-keep")
	tb.applyPolicy(derivedPolicy("pd-keep", "pd-keep", "out", "one", false, false))
	t.Cleanup(func() { tb.deletePolicy("pd-keep") })
	tb.trigger("a", "pd-keep", "a1")
	tb.waitFor("a's downstream", "a-out", exists)
	if n := cachedTriggers(t, reg, "configmaps.v1", "app=pd-keep"); n != -1 {
		t.Errorf("a policy that does not synchronize has a filtered informer holding %v objects", n)
	}
	// Counted by the informer's handlers, which may come after the list
	// has handed the trigger to the sync.
	poll(t, "the unfiltered informer holding the trigger and its downstream at least", func(context.Context) (bool, error) {
		return cachedTriggers(t, reg, "configmaps.v1", "") >= 2, nil
	})
	tb.trigger("a", "elsewhere", "a1")
	tb.settle("pd-keep", 1)
	if tb.get("a-out") == nil {
		t.Error("a non-synchronizing policy's trigger labelled out lost its downstream")
	}
}

// TestPoliciesWithDifferentSelectors: two policies on ConfigMaps with
// different selectors each have an informer of their own and generate for
// their own triggers alone; a policy whose selector cannot be pushed (its
// rules admit on CREATE only, so that a ConfigMap labelled into its
// selection must not be admitted) and one without an objectSelector share
// the unfiltered informer, and all four work.
func TestPoliciesWithDifferentSelectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) { o.Metrics = reg })
	ns := "pd-mixed"
	createNamespace(t, ns, map[string]string{"pd-mixed": "yes"})
	tb := &table{t: t, ns: ns, kube: kubernetes.NewForConfigOrDie(cfg)}
	tb.existing("old")
	tb.applyPolicy(derivedPolicy("pd-one", "pd-one", "one", "1", true, false))
	tb.applyPolicy(derivedPolicy("pd-two", "pd-two", "two", "2", true, false))
	createOnly := replaceOnce(t, derivedPolicy("pd-create", "pd-create", "create", "c", true, false),
		`operations: ["CREATE", "UPDATE"]`, `operations: ["CREATE"]`)
	tb.applyPolicy(createOnly)
	everything := replaceOnce(t, derivedPolicy("pd-all", "pd-all", "all", "x", true, false),
		"    objectSelector:\n      matchLabels: {app: pd-all}\n", "    namespaceSelector:\n      matchLabels: {pd-mixed: \"yes\"}\n")
	tb.applyPolicy(everything)
	for _, p := range []string{"pd-one", "pd-two", "pd-create", "pd-all"} {
		t.Cleanup(func() { tb.deletePolicy(p) })
	}
	tb.trigger("a", "pd-one", "a1")
	tb.trigger("b", "pd-two", "b1")
	tb.trigger("c", "pd-create", "c1")
	for _, name := range []string{"a-one", "b-two", "c-create", "a-all", "b-all", "c-all"} {
		tb.waitFor(name, name, exists)
	}
	waitCached(t, reg, "app=pd-one", 1)
	waitCached(t, reg, "app=pd-two", 1)
	if n := cachedTriggers(t, reg, "configmaps.v1", "app=pd-create"); n != -1 {
		t.Errorf("a CREATE-only policy has a filtered informer holding %v objects", n)
	}
	// Labelled into the CREATE-only policy's selection, an existing
	// ConfigMap is updated, not created: it is not admitted.
	tb.trigger("old", "pd-create", "o1")
	tb.trigger("marker", "pd-create", "m") // created: once generated, the change before it is synced
	tb.waitFor("a sync after the change", "marker-create", exists)
	for _, name := range []string{"a-two", "b-one", "a-create", "old-create"} {
		if tb.get(name) != nil {
			t.Errorf("%s generated by a policy that does not select its trigger", name)
		}
	}
}

// TestSelectorChangeMovesThePolicy: a policy whose objectSelector changes
// lists the objects of its new selector, generates for them and prunes
// what the old one selected; the informer no policy needs any more stops.
func TestSelectorChangeMovesThePolicy(t *testing.T) {
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) { o.Metrics = reg })
	tb := newTable(t, "pd-move")
	tb.applyPolicy(derivedPolicy("pd-move", "pd-move-a", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("pd-move") })
	tb.trigger("a", "pd-move-a", "a1")
	tb.trigger("b", "pd-move-b", "b1")
	tb.waitFor("a's downstream", "a-out", exists)
	waitCached(t, reg, "app=pd-move-a", 1)

	tb.applyPolicy(derivedPolicy("pd-move", "pd-move-b", "out", "one", true, false))
	tb.waitFor("b's downstream, under the new selector", "b-out", exists)
	tb.waitFor("a's downstream, no longer selected, to be pruned", "a-out", absent)
	waitCached(t, reg, "app=pd-move-b", 1)
	waitCached(t, reg, "app=pd-move-a", -1)
}
