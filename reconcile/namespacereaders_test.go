package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/reconcile"
)

// applyNamespacePolicy applies fixtures/configmap-copy as the policy
// name, for each ConfigMap labelled nsread=yes, existing ones too: its copy
// is named after the trigger and the policy, and holds data (a CEL map).
func applyNamespacePolicy(t *testing.T, name, data string) {
	t.Helper()
	applyFixture(t, "configmap-copy", "policy.yaml", func(u *unstructured.Unstructured) {
		u.SetName(name)
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"nsread": "yes"}, "spec", "matchConstraints", "objectSelector", "matchLabels")
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
		gen, _, _ := unstructured.NestedSlice(u.Object, "spec", "generate")
		g := gen[0].(map[string]any)
		g["expression"] = strings.NewReplacer(`"-out"`, `"-`+name+`"`, `{"source": object.metadata.name}`, data).Replace(g["expression"].(string))
		_ = unstructured.SetNestedSlice(u.Object, gen, "spec", "generate")
	})
}

// TestANamespaceChangeSyncsInFullOnlyThePoliciesThatReadIt: a change to a
// Namespace other than its labels (an annotation) is seen whole by the
// next sync of a policy that reads namespaceObject, which generates from
// it again, and of a policy a PolicyException reading it names, and leaves
// a policy that does neither syncing only the triggers that changed. Each step of a Namespace's deletion, and every
// annotation a controller sets on one, cost every policy a sync of all its
// triggers before.
func TestANamespaceChangeSyncsInFullOnlyThePoliciesThatReadIt(t *testing.T) {
	const ns = "ns-readers"
	tb := newTable(t, ns)
	t.Cleanup(func() { _ = tb.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	reg := prometheus.NewRegistry()
	runController(t, func(o *reconcile.Options) {
		// No resync: a full sync at the hour would read as the change's.
		o.Metrics, o.PolicyExceptions, o.ExceptionNamespace, o.ResyncSchedule = reg, true, ns, ""
	})
	applyException(t, exceptionDoc(ns, "skip-marked", "ns-excepted",
		`has(namespaceObject.metadata.annotations) && "skip" in namespaceObject.metadata.annotations`))
	applyNamespacePolicy(t, "ns-excepted", `{"source": object.metadata.name}`)
	applyNamespacePolicy(t, "ns-blind", `{"source": object.metadata.name}`)
	applyNamespacePolicy(t, "ns-reader",
		`{"team": has(namespaceObject.metadata.annotations) && "team" in namespaceObject.metadata.annotations ? namespaceObject.metadata.annotations["team"] : "none"}`)

	ctx := context.Background()
	copied := func(trigger, policy, key string) (string, bool) {
		cm, err := tb.kube.CoreV1().ConfigMaps(ns).Get(ctx, trigger+"-"+policy, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "", false
		case err != nil:
			t.Fatal(err)
		}
		return cm.Data[key], true
	}
	trigger := func(i int) string {
		t.Helper()
		name := fmt.Sprintf("t-%d", i)
		if _, err := tb.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nsread": "yes"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, name+"'s copies", func(context.Context) (bool, error) {
			_, blind := copied(name, "ns-blind", "source")
			_, reader := copied(name, "ns-reader", "team")
			_, excepted := copied(name, "ns-excepted", "source")
			return blind && reader && excepted, nil
		})
		return name
	}
	trigger(0)
	if team, _ := copied("t-0", "ns-reader", "team"); team != "none" {
		t.Fatalf("t-0's copy of ns-reader holds team %q, want none", team)
	}
	fulls := func(policy string) float64 {
		return metricValue(t, reg, "sprout_syncs_total", map[string]string{"policy": "GeneratingPolicy/" + policy, "mode": "full"})
	}
	poll(t, "the first syncs", func(context.Context) (bool, error) {
		return fulls("ns-blind") >= 1 && fulls("ns-reader") >= 1 && fulls("ns-excepted") >= 1, nil
	})
	blind, reader, excepted := fulls("ns-blind"), fulls("ns-reader"), fulls("ns-excepted")

	if _, err := tb.kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"team":"blue"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Namespace's change queues no policy: each new trigger queues
	// them all, until a sync of ns-reader has seen the change (its copy of t-0
	// reads it); one more trigger then comes after the change for each.
	i := 1
	for ; ; i++ {
		trigger(i)
		if team, _ := copied("t-0", "ns-reader", "team"); team == "blue" {
			break
		}
		if i == 20 {
			t.Fatal("20 triggers after the Namespace's annotation, ns-reader's copy of t-0 still does not read it")
		}
	}
	trigger(i + 1)
	if got := fulls("ns-reader") - reader; got < 1 {
		t.Errorf("ns-reader, which reads namespaceObject, made %v full syncs after its Namespace changed, want at least 1", got)
	}
	if got := fulls("ns-excepted") - excepted; got < 1 {
		t.Errorf("ns-excepted, named by an exception that reads namespaceObject, made %v full syncs after its Namespace changed, want at least 1", got)
	}
	if got := fulls("ns-blind") - blind; got != 0 {
		t.Errorf("ns-blind, which does not read namespaceObject, made %v full syncs after a Namespace's annotation changed, want none", got)
	}
}
