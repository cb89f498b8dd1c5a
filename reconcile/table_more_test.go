package reconcile_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestPolicyChangesKindAndTouchesEveryTrigger: a policy that switches from
// ConfigMaps to NetworkPolicies replaces the objects of every trigger and
// prunes the old kind; data changes reach every trigger's object.
func TestPolicyChangesKindAndTouchesEveryTrigger(t *testing.T) {
	startController(t)
	tb := newTable(t, "kind-change")
	kube := kubernetes.NewForConfigOrDie(cfg)
	tb.applyPolicy(derivedPolicy("kind-change", "kind-change", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("kind-change") })
	tb.trigger("a", "kind-change", "a1")
	tb.trigger("b", "kind-change", "b1")
	tb.waitFor("a's downstream", "a-out", exists)
	tb.waitFor("b's downstream", "b-out", exists)

	tb.applyPolicy(derivedPolicy("kind-change", "kind-change", "out", "two", true, false))
	for _, name := range []string{"a-out", "b-out"} {
		tb.waitFor("the data change on "+name, name, func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["policy"] == "two" })
	}

	doc := replaceOnce(t, derivedPolicy("kind-change", "kind-change", "out", "two", true, false), `"apiVersion": "v1", "kind": "ConfigMap",`, `"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",`)
	doc = replaceOnce(t, doc, `"data": {"from": object.data.?value.orValue(""), "policy": "two"}`, `"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}`)
	tb.applyPolicy(doc)
	for _, name := range []string{"a-out", "b-out"} {
		poll(t, "the NetworkPolicy "+name, func(ctx context.Context) (bool, error) {
			_, err := kube.NetworkingV1().NetworkPolicies("kind-change").Get(ctx, name, metav1.GetOptions{})
			return err == nil, nil
		})
		tb.waitFor("the ConfigMap "+name+" to be pruned", name, absent)
	}
}

// TestOrphanAndClonesOnPolicyDelete: orphan true keeps everything; orphan
// false takes data objects and leaves clones.
func TestOrphanAndClonesOnPolicyDelete(t *testing.T) {
	startController(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	tb := newTable(t, "orphans")

	tb.applyPolicy(derivedPolicy("orphaning", "orphans", "kept", "one", true, true))
	tb.trigger("a", "orphans", "a1")
	tb.waitFor("the downstream", "a-kept", exists)
	tb.deletePolicy("orphaning")
	tb.settleWith(derivedPolicy("orphan-marker", "orphans", "marker", "one", true, false), "a-marker")
	if cm := tb.get("a-kept"); cm == nil {
		t.Error("orphanDownstreamOnPolicyDelete did not keep the downstream")
	} else if cm.Labels["generate.kyverno.io/policy-name"] != "orphaning" {
		t.Errorf("the orphan lost its labels, needed for kubectl clean-up: %v", cm.Labels)
	}

	// Clones stay when their policy goes, even with orphan false.
	createNamespace(t, "orphans-src", nil)
	if _, err := kube.CoreV1().Secrets("orphans-src").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dest := newTable(t, "orphans-dest")
	dest.applyPolicy(clonePolicy("cloner", "cl-orph", "orphans-src", true))
	dest.trigger("t", "cl-orph", "x")
	poll(t, "the clone", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Secrets("orphans-dest").Get(ctx, "main", metav1.GetOptions{})
		return err == nil, nil
	})
	dest.deletePolicy("cloner")
	tb.deletePolicy("orphan-marker")
	tb.settleWith(derivedPolicy("orphan-marker-2", "orphans", "marker2", "one", true, false), "a-marker2")
	t.Cleanup(func() { tb.deletePolicy("orphan-marker-2") })
	if _, err := kube.CoreV1().Secrets("orphans-dest").Get(ctx, "main", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("deleting the policy deleted its clone")
	}
	tb.waitFor("the data downstream of the deleted marker policy", "a-marker", absent)
}

// settleWith applies a marker policy (with generateExisting) and waits for
// its first downstream: once it exists, the controller has processed what
// came before.
func (tb *table) settleWith(doc, downstream string) {
	tb.t.Helper()
	tb.applyPolicy(generatingExisting(doc))
	tb.waitFor("the marker policy's downstream", downstream, exists)
}

// TestGenerateExistingHonoursEveryCriterion: existing triggers get
// downstreams at policy creation only where namespaceSelector,
// objectSelector, resourceNames and matchConditions all select them.
// Without generateExisting, only a later event admits an existing trigger.
func TestGenerateExistingHonoursEveryCriterion(t *testing.T) {
	startController(t)
	in := newTable(t, "gex-in")
	createNamespace(t, "gex-out", nil)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ns, err := kube.CoreV1().Namespaces().Get(context.Background(), "gex-in", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{"gex": "yes"}
	if _, err := kube.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := &table{t: t, ns: "gex-out", kube: kube}
	in.trigger("good", "gex", "ok")
	in.trigger("unnamed", "gex", "ok")    // not in resourceNames
	in.trigger("bad-cond", "gex", "no")   // fails the matchCondition
	in.trigger("other-app", "nope", "ok") // fails the objectSelector
	out.trigger("good", "gex", "ok")      // fails the namespaceSelector
	// Existing means older than the policy, to the second creation
	// timestamps carry: a trigger of the policy's second counts as new.
	waitForNextSecond(t, in.get("good").CreationTimestamp.Time)

	policy := func(name string, existing bool) string {
		doc := derivedPolicy(name, "gex", "out-"+name, "one", true, false)
		doc = replaceOnce(t, doc, "    objectSelector:\n", `    namespaceSelector:
      matchLabels: {gex: "yes"}
    objectSelector:
`)
		doc = replaceOnce(t, doc, `      resources: ["configmaps"]`, `      resources: ["configmaps"]
      resourceNames: ["good", "bad-cond", "other-app"]`)
		doc = replaceOnce(t, doc, "  generate:\n", `  matchConditions:
  - name: ok
    expression: object.data.value == "ok"
  generate:
`)
		if existing {
			doc = generatingExisting(doc)
		}
		return doc
	}
	in.applyPolicy(policy("gex-on", true))
	in.applyPolicy(policy("gex-off", false))
	t.Cleanup(func() { in.deletePolicy("gex-on"); in.deletePolicy("gex-off") })

	in.waitFor("the matching existing trigger's downstream", "good-out-gex-on", exists)
	// A new trigger for gex-off: when it has its downstream, gex-off has synced.
	in.trigger("bad-cond", "gex", "ok") // an UPDATE: admits bad-cond for both
	in.waitFor("the updated trigger's downstream (gex-off)", "bad-cond-out-gex-off", exists)
	in.waitFor("the updated trigger's downstream (gex-on)", "bad-cond-out-gex-on", exists)
	for _, name := range []string{"unnamed-out-gex-on", "other-app-out-gex-on", "good-out-gex-off"} {
		if in.get(name) != nil {
			t.Errorf("%s was generated", name)
		}
	}
	if out.get("good-out-gex-on") != nil {
		t.Error("a trigger outside the namespaceSelector got a downstream")
	}
}

// waitForNextSecond polls, creating probe objects, until the API server
// stamps creations later than after (timestamps have one-second precision).
func waitForNextSecond(t *testing.T, after time.Time) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	poll(t, "the API server's clock to pass "+after.String(), func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "clock-probe-"}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		_ = kube.CoreV1().ConfigMaps("default").Delete(ctx, cm.Name, metav1.DeleteOptions{})
		return cm.CreationTimestamp.Time.After(after), nil
	})
}
