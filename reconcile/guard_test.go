package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// listPolicy is testpolicies/items.yaml: one ConfigMap per comma-separated
// item of the trigger's data.items, plus the extra objects (CEL map literals).
func listPolicy(name, app string, annotations map[string]string, extra ...string) string {
	return fixtures.MustPolicyFile("items", fixtures.Params{Name: name, App: app, Annotations: annotations,
		Extra: strings.ReplaceAll(strings.Join(extra, ", "), "\n", " ")})
}

func itemsTrigger(t *testing.T, kube kubernetes.Interface, ns, name, app, items string) {
	t.Helper()
	_, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Data:       map[string]string{"items": items},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// TestObjectCapPerTrigger: a trigger whose evaluation generates more objects
// than the policy's cap is an evaluation error naming the trigger and the
// cap; the policy's other triggers are generated, and nothing is pruned.
func TestObjectCapPerTrigger(t *testing.T) {
	startController(t)
	tb := newTable(t, "cap")
	tb.applyPolicy(listPolicy("cap", "cap", map[string]string{"sprout.dev/max-objects-per-trigger": "3"}))
	t.Cleanup(func() { tb.deletePolicy("cap") })
	itemsTrigger(t, tb.kube, "cap", "small", "cap", "a,b")
	itemsTrigger(t, tb.kube, "cap", "big", "cap", "a,b,c,d,e")

	tb.waitFor("the small trigger's objects", "small-b", exists)
	poll(t, "the cap on the policy's status", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "cap")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed &&
			strings.Contains(c.Message, "trigger ConfigMap cap/big") && strings.Contains(c.Message, "generates 5 objects, more than the 3"), err
	})
	if tb.get("big-a") != nil {
		t.Error("a trigger over the cap generated objects")
	}

	// Raising the cap lifts it.
	tb.applyPolicy(listPolicy("cap", "cap", map[string]string{"sprout.dev/max-objects-per-trigger": "5"}))
	tb.waitFor("the big trigger's objects once the cap allows them", "big-e", exists)
}

// spinningPolicy is derivedPolicy whose evaluation of a trigger with
// data.value "spin" runs for a minute or more within the cost limit: `in`
// on a dyn list is charged as one call whatever the length of the list.
func spinningPolicy(name, app string) string {
	return spinning(derivedPolicy(name, app, "out", "spinning", true, false))
}

// spinning gives a policy of testpolicies/derived.yaml, with Value
// "spinning", the variables that make spinningPolicy spin.
func spinning(p string) string {
	p = strings.Replace(p, "  generate:\n", `  variables:
  - name: big
    expression: "lists.range(16384)"
  - name: spin
    expression: "object.data.?value.orValue('') == 'spin' ? lists.range(100000).map(i, -1 in variables.big).size() : 0"
  generate:
`, 1)
	return strings.Replace(p, `"policy": "spinning"`, `"policy": "spinning", "hashes": string(variables.spin)`, 1)
}

// TestEvaluationTimeout: an evaluation that runs past --evaluation-timeout
// stops, and the policy's status names the trigger, the field path and the
// limit, the log the policy too; its other triggers are generated, another
// policy on the same triggers is unaffected, nothing is pruned or rewritten,
// and the policy recovers once the trigger no longer spins.
func TestEvaluationTimeout(t *testing.T) {
	logs, _ := runController(t, func(o *reconcile.Options) { o.EvaluationTimeout = time.Second })
	tb := newTable(t, "evaltimeout")
	tb.applyPolicy(spinningPolicy("spinning", "evaltimeout"))
	t.Cleanup(func() { tb.deletePolicy("spinning") })
	tb.applyPolicy(derivedPolicy("next-to-spinning", "evaltimeout", "next", "next", true, false))
	t.Cleanup(func() { tb.deletePolicy("next-to-spinning") })
	tb.trigger("steady", "evaltimeout", "s")
	tb.trigger("spinner", "evaltimeout", "calm")
	for _, name := range []string{"steady-next", "spinner-next", "steady-out"} {
		tb.waitFor(name, name, exists)
	}
	before := tb.waitFor("spinner-out", "spinner-out", exists)

	tb.trigger("spinner", "evaltimeout", "spin")
	var c *metav1.Condition
	poll(t, "the timeout on the policy's status", func(ctx context.Context) (bool, error) {
		var err error
		c, err = policyCondition(ctx, "spinning")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed, err
	})
	t.Logf("Ready: %s", c.Message)
	// Whichever bound comes first stops it: the time limit, or the cost
	// budget that every element an `in` compares is charged to; which one
	// depends on the machine's speed.
	const where = "trigger ConfigMap evaltimeout/spinner: spec.generate[0].expression: spec.variables[1].expression: "
	limited := func(s string) bool {
		return strings.Contains(s, "evaluation took longer than its time limit of 1s") || strings.Contains(s, "cost more than their limit")
	}
	if !strings.Contains(c.Message, where) || !limited(c.Message) {
		t.Errorf("Ready message %q does not name the expression and the bound it passed", c.Message)
	}
	poll(t, "the policy and the limit in the log", func(context.Context) (bool, error) {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "policy=GeneratingPolicy/spinning") && strings.Contains(line, "evaltimeout/spinner") && limited(line) {
				return true, nil
			}
		}
		return false, nil
	})

	tb.waitFor("the other policy's object from the spinning trigger", "spinner-next", func(cm *corev1.ConfigMap) bool {
		return cm != nil && cm.Data["from"] == "spin"
	})
	tb.trigger("late", "evaltimeout", "l")
	tb.waitFor("a later trigger's object from the timing-out policy", "late-out", exists)
	tb.waitFor("a later trigger's object from the other policy", "late-next", exists)
	if cm := tb.get("spinner-out"); cm == nil || cm.ResourceVersion != before.ResourceVersion {
		t.Errorf("the object of the trigger that timed out was pruned or rewritten: %v", cm)
	}
	if tb.get("steady-out") == nil {
		t.Error("the steady trigger's object was pruned")
	}

	tb.trigger("spinner", "evaltimeout", "calm again")
	tb.waitFor("the object of the calmed trigger", "spinner-out", func(cm *corev1.ConfigMap) bool {
		return cm != nil && cm.Data["from"] == "calm again"
	})
	poll(t, "the policy Ready again", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "spinning")
		return c != nil && c.Status == metav1.ConditionTrue, err
	})
}

// TestRefusedKindsAndBindings: objects of kinds outside --allowed-kinds and
// bindings to a ClusterRole that grants everything, which Sprout does not
// hold, are refused, named on the policy's status; the policy's other
// objects are written.
func TestRefusedKindsAndBindings(t *testing.T) {
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	for name, rule := range map[string]rbacv1.PolicyRule{
		"guard-everything": {APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		"guard-read-cm":    {APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	} {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}
		if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tb := newTable(t, "guard")
	runGuardedSprout(t, "guard", func(o *reconcile.Options) {
		o.AllowedKinds = []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}}
	})
	binding := func(name, role string) string {
		return fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": %q},
		  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": %q},
		  "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "guard"}]}`, name, role)
	}
	secret := `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "not-allowed"}, "stringData": {"k": "v"}}`
	tb.applyPolicy(listPolicy("guard", "guard", nil, binding("can-read", "guard-read-cm"), binding("can-do-anything", "guard-everything"), secret))
	t.Cleanup(func() { tb.deletePolicy("guard") })
	itemsTrigger(t, tb.kube, "guard", "t", "guard", "a")

	tb.waitFor("the allowed ConfigMap", "t-a", exists)
	poll(t, "the allowed binding", func(ctx context.Context) (bool, error) {
		_, err := kube.RbacV1().RoleBindings("guard").Get(ctx, "can-read", metav1.GetOptions{})
		return err == nil, nil
	})
	var c *metav1.Condition
	poll(t, "the refusals on the policy's status", func(ctx context.Context) (bool, error) {
		var err error
		c, err = policyCondition(ctx, "guard")
		return c != nil && c.Reason == reconcile.ReasonRefused, err
	})
	for _, want := range []string{
		"Secret/guard/not-allowed: refused: kind Secret is not in --allowed-kinds",
		"RoleBinding/guard/can-do-anything: refused: roleRef: ClusterRole guard-everything grants what Sprout does not hold in namespace guard: * on *.*",
	} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Ready message %q does not contain %q", c.Message, want)
		}
	}
	if _, err := kube.RbacV1().RoleBindings("guard").Get(ctx, "can-do-anything", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the binding to an all-powerful role: %v", err)
	}
	if _, err := kube.CoreV1().Secrets("guard").Get(ctx, "not-allowed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret of a kind not allowed: %v", err)
	}
}

// TestTwoPoliciesOneObject: a policy that generates an object another
// policy owns reports the conflict, the owner hears of it too, the owner
// keeps the object, and resyncs write nothing (no flapping).
func TestTwoPoliciesOneObject(t *testing.T) {
	var syncsB atomic.Int64
	runController(t, func(o *reconcile.Options) {
		o.ResyncSchedule = "@every 1s"
		o.OnSync = func(policy string, _ error) {
			if policy == "GeneratingPolicy/second-owner" {
				syncsB.Add(1)
			}
		}
	})
	tb := newTable(t, "twice")
	tb.applyPolicy(derivedPolicy("first-owner", "twice", "out", "first", true, false))
	t.Cleanup(func() { tb.deletePolicy("first-owner") })
	tb.trigger("a", "twice", "a1")
	first := tb.waitFor("the first policy's object", "a-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["policy"] == "first" })

	tb.applyPolicy(generatingExisting(derivedPolicy("second-owner", "twice", "out", "second", true, false)))
	t.Cleanup(func() { tb.deletePolicy("second-owner") })
	poll(t, "the conflict on the second policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "second-owner")
		return c != nil && c.Reason == reconcile.ReasonNotOwned && strings.Contains(c.Message, "ConfigMap/twice/a-out") &&
			strings.Contains(c.Message, "owned by policy first-owner"), err
	})
	poll(t, "the conflict on the first policy", func(ctx context.Context) (bool, error) {
		return hasEvent(eventsOn(ctx, t, "default", "GeneratingPolicy", "first-owner"), reconcile.ReasonPolicyConflict,
			"ConfigMap/twice/a-out is also generated by GeneratingPolicy/second-owner"), nil
	})
	n := syncsB.Load()
	poll(t, "three resyncs of the second policy", func(context.Context) (bool, error) { return syncsB.Load() >= n+3, nil })
	if cm := tb.get("a-out"); cm.ResourceVersion != first.ResourceVersion || cm.Data["policy"] != "first" {
		t.Errorf("the object changed hands or was written again: %v (was resourceVersion %s)", cm, first.ResourceVersion)
	}
	ctx := context.Background()
	if n := eventCount(eventsOn(ctx, t, "default", "GeneratingPolicy", "second-owner"), reconcile.ReasonNotOwned); n != 1 {
		t.Errorf("%d NotOwned events on the second policy", n)
	}
	if n := eventCount(eventsOn(ctx, t, "default", "GeneratingPolicy", "first-owner"), reconcile.ReasonPolicyConflict); n != 1 {
		t.Errorf("%d PolicyConflict events on the first policy", n)
	}
}

// TestRejectedObjectsAndSecrets: objects the API server rejects (an invalid
// name, an unknown kind) fail alone and are named on the policy's status;
// the policy's other objects (a Secret, unicode data, a ConfigMap near the
// 1 MiB limit, its data from the trigger) are written; a Secret's value never reaches the log, the
// policy's status or its Events.
func TestRejectedObjectsAndSecrets(t *testing.T) {
	logs := startController(t)
	tb := newTable(t, "reject")
	const secretValue = "s3cr3t-do-not-print"
	big := strings.Repeat("ü", 400_000) // 800,000 bytes of UTF-8
	tb.applyPolicy(listPolicy("reject", "reject", nil,
		`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}}`,
		`{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}`,
		`{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"password": "`+secretValue+`"}}`,
		`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"text": object.data.big, "greeting": "こんにちは 🌱"}}`,
	))
	t.Cleanup(func() { tb.deletePolicy("reject") })
	_, err := tb.kube.CoreV1().ConfigMaps("reject").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{"app": "reject"}},
		Data:       map[string]string{"items": "a", "big": big},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	tb.waitFor("the valid ConfigMap", "t-a", exists)
	bigCM := tb.waitFor("the large unicode ConfigMap", "big", exists)
	if bigCM.Data["greeting"] != "こんにちは 🌱" || bigCM.Data["text"] != big {
		t.Error("the unicode data came back changed")
	}
	ctx := context.Background()
	poll(t, "the Secret", func(ctx context.Context) (bool, error) {
		_, err := tb.kube.CoreV1().Secrets("reject").Get(ctx, "creds", metav1.GetOptions{})
		return err == nil, nil
	})
	var c *metav1.Condition
	poll(t, "the rejections on the policy's status", func(ctx context.Context) (bool, error) {
		var err error
		c, err = policyCondition(ctx, "reject")
		return c != nil && c.Reason == reconcile.ReasonApplyFailed && strings.Contains(c.Message, "Bad_Name") && strings.Contains(c.Message, "Widget"), err
	})
	poll(t, "the failure event", func(ctx context.Context) (bool, error) {
		return eventCount(eventsOn(ctx, t, "default", "GeneratingPolicy", "reject"), reconcile.ReasonApplyFailed) > 0, nil
	})
	var texts []string
	texts = append(texts, logs.String(), c.Message)
	for _, e := range eventsOn(ctx, t, "default", "GeneratingPolicy", "reject") {
		texts = append(texts, e.Message)
	}
	for _, text := range texts {
		if strings.Contains(text, secretValue) {
			t.Errorf("the Secret's value was printed: %.300s", text)
		}
	}
}
