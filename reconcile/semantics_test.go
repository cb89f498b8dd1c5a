package reconcile_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestNoOpUpdateOfACreateOnlyTriggerKeepsItsDownstream: operations decide
// which events admit a trigger, not what is retained (Kyverno #17452).
func TestNoOpUpdateOfACreateOnlyTriggerKeepsItsDownstream(t *testing.T) {
	startController(t)
	tb := newTable(t, "create-only")
	doc := derivedPolicy("create-only", "create-only", "out", "one", true, false)
	tb.applyPolicy(replaceOnce(t, doc, `operations: ["CREATE", "UPDATE"]`, `operations: ["CREATE"]`))
	t.Cleanup(func() { tb.deletePolicy("create-only") })
	tb.trigger("a", "create-only", "a1")
	tb.waitFor("the downstream", "a-out", exists)
	tb.trigger("a", "create-only", "a1") // an UPDATE that changes nothing the policy reads
	tb.edit("a", "unrelated", "x")       // and one that changes something else
	tb.settle("create-only", 1)
	if tb.get("a-out") == nil {
		t.Error("an update of a CREATE-only trigger deleted its downstream")
	}
}

// TestSwitchingSyncOffStopsRepairs: objects stay, later deletes are not repaired.
func TestSwitchingSyncOffStopsRepairs(t *testing.T) {
	startController(t)
	tb := newTable(t, "sync-switch")
	tb.applyPolicy(derivedPolicy("sync-switch", "sync-switch", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("sync-switch") })
	tb.trigger("a", "sync-switch", "a1")
	tb.waitFor("the downstream", "a-out", exists)

	tb.applyPolicy(derivedPolicy("sync-switch", "sync-switch", "out", "one", false, false))
	tb.observed("sync-switch")
	tb.settle("sync-switch", 1)
	if tb.get("a-out") == nil {
		t.Fatal("switching sync off deleted the downstream")
	}
	// Generated once: a change of its trigger no longer updates it.
	tb.trigger("a", "sync-switch", "a2")
	tb.settle("sync-switch", 3)
	if cm := tb.get("a-out"); cm == nil || cm.Data["from"] != "a1" {
		t.Errorf("a trigger change updated the downstream after sync was switched off: %v", cm)
	}
	tb.delete("a-out")
	tb.settle("sync-switch", 2)
	if tb.get("a-out") != nil {
		t.Error("a deleted downstream was repaired after sync was switched off")
	}
}

// TestClusterScopedDownstreamAndFanOut: a Namespace trigger generates a
// ClusterRoleBinding (no namespace) and a RoleBinding into each namespace
// listed on it; removing the label prunes all of them.
func TestClusterScopedDownstreamAndFanOut(t *testing.T) {
	// Sprout, a cluster-admin here, writes the bindings itself.
	runController(t, func(o *reconcile.Options) { o.AllowUnnamedGrants = true })
	tb := newTable(t, "fan-target-1")
	createNamespace(t, "fan-target-2", nil)
	tb.applyPolicy(fixtures.MustPolicyFile("fan-out", fixtures.Params{Name: "fan-out"}))
	t.Cleanup(func() { tb.deletePolicy("fan-out") })
	kube := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, "fan-source", map[string]string{"fan-out": "fan-target-1.fan-target-2"})
	poll(t, "the ClusterRoleBinding and both RoleBindings", func(ctx context.Context) (bool, error) {
		if _, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "fan-source-viewers", metav1.GetOptions{}); err != nil {
			return false, notFoundIsNil(err)
		}
		for _, ns := range []string{"fan-target-1", "fan-target-2"} {
			if _, err := kube.RbacV1().RoleBindings(ns).Get(ctx, "fan-source-edit", metav1.GetOptions{}); err != nil {
				return false, notFoundIsNil(err)
			}
		}
		return true, nil
	})

	ns, err := kube.CoreV1().Namespaces().Get(context.Background(), "fan-source", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(ns.Labels, "fan-out")
	if _, err := kube.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "every downstream to be pruned", func(ctx context.Context) (bool, error) {
		_, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "fan-source-viewers", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		for _, ns := range []string{"fan-target-1", "fan-target-2"} {
			if _, err := kube.RbacV1().RoleBindings(ns).Get(ctx, "fan-source-edit", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestNamespacedPolicy: generates in its namespace only, reports an attempt
// to write elsewhere, and cleans up on trigger and policy deletion.
func TestNamespacedPolicy(t *testing.T) {
	startController(t)
	tb := newTable(t, "team-ns")
	// It runs as the namespace's "default" account, with the rights given it.
	grant(t, tb.kube, "team-ns", reconcile.DefaultServiceAccount, allVerbs, "configmaps")
	policy := func(target string) string {
		doc := fixtures.MustPolicyFile("derived", fixtures.Params{Name: "team-policy", Namespace: "team-ns", App: "team",
			Suffix: "out", Value: "one", Synchronize: true})
		return replaceOnce(t, doc, `"metadata": {"name":`, `"metadata": {`+target+`"name":`)
	}
	tb.applyPolicy(policy(""))
	tb.trigger("a", "team", "a1")
	cm := tb.waitFor("the downstream in the policy's namespace", "a-out", exists)
	if cm.Labels["sprout.dev/policy-namespace"] != "team-ns" {
		t.Errorf("labels %v do not name the policy's namespace", cm.Labels)
	}
	tb.trigger("b", "team", "b1")
	tb.waitFor("b's downstream", "b-out", exists)
	tb.delete("b")
	tb.waitFor("b's downstream to be pruned", "b-out", absent)

	// Another namespace is refused, with a condition naming the field.
	tb.applyPolicy(policy(`"namespace": "elsewhere", `))
	nsPolicies := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace("team-ns")
	poll(t, "the refusal on the policy", func(ctx context.Context) (bool, error) {
		c, err := namespacedPolicyCondition(ctx, "team-ns", "team-policy")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed && contains(c.Message, `outside namespace "team-ns"`), err
	})
	if tb.get("a-out") == nil {
		t.Error("a failed evaluation pruned the existing downstream")
	}

	tb.applyPolicy(policy(""))
	if err := nsPolicies.Delete(context.Background(), "team-policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the downstream to go with the policy", "a-out", absent)
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if !contains(s, old) {
		t.Fatalf("%q not found", old)
	}
	return replaceFirst(s, old, new)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func replaceFirst(s, old, new string) string { return strings.Replace(s, old, new, 1) }

// TestGenerateOnDelete: a policy that lists only DELETE generates nothing
// for live triggers, generates once from a deleted trigger's last state, and
// never prunes what it generated for the trigger's absence.
func TestGenerateOnDelete(t *testing.T) {
	startController(t)
	tb := newTable(t, "on-delete")
	doc := derivedPolicy("on-delete", "on-delete", "tombstone", "one", true, false)
	doc = replaceOnce(t, doc, `operations: ["CREATE", "UPDATE"]`, `operations: ["DELETE"]`)
	doc = replaceOnce(t, doc, `generator.Apply(object.metadata.namespace, [{`, `generator.Apply(oldObject.metadata.namespace, [{`)
	doc = replaceOnce(t, doc, `object.metadata.name + "-tombstone"`, `oldObject.metadata.name + "-tombstone"`)
	doc = replaceOnce(t, doc, `object.data.?value.orValue("")`, `request.operation + ":" + oldObject.data.?value.orValue("")`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("on-delete") })
	// A trigger created and deleted before the watch exists is never seen.
	poll(t, "the policy to be running", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "on-delete")
		return c != nil && c.Status == metav1.ConditionTrue, err
	})

	tb.trigger("a", "on-delete", "last words")
	tb.trigger("b", "on-delete", "b")
	tb.delete("b")
	tb.waitFor("b's tombstone downstream", "b-tombstone", exists)
	if tb.get("a-tombstone") != nil {
		t.Fatal("a live trigger of a DELETE-only policy got a downstream")
	}
	tb.delete("a")
	cm := tb.waitFor("a's tombstone downstream", "a-tombstone", exists)
	if cm.Data["from"] != "DELETE:last words" {
		t.Errorf("generated from %q, want the tombstone replayed as a DELETE", cm.Data["from"])
	}
	tb.trigger("c", "on-delete", "c")
	tb.delete("c")
	tb.waitFor("a later sync", "c-tombstone", exists)
	if tb.get("a-tombstone") == nil || tb.get("b-tombstone") == nil {
		t.Error("a downstream generated on DELETE was pruned")
	}
}

// TestInformersFollowPolicies: a resource is watched while a policy needs it
// and no longer once the last such policy is gone.
func TestInformersFollowPolicies(t *testing.T) {
	_, c := runController(t, nil)
	tb := newTable(t, "watched")
	doc := replaceOnce(t, derivedPolicy("watched", "watched", "out", "one", true, false), `resources: ["configmaps"]`, `resources: ["serviceaccounts"]`)
	tb.applyPolicy(doc)
	has := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	poll(t, "serviceaccounts to be watched", func(context.Context) (bool, error) {
		triggers, _ := c.Watched()
		return has(triggers, "serviceaccounts.v1"), nil
	})
	tb.deletePolicy("watched")
	poll(t, "serviceaccounts to be released", func(context.Context) (bool, error) {
		triggers, _ := c.Watched()
		return !has(triggers, "serviceaccounts.v1"), nil
	})
}

// TestUpdateIsReplayedWithOldObject: a policy that reads request.operation
// and oldObject sees a trigger's last UPDATE as a webhook would have.
func TestUpdateIsReplayedWithOldObject(t *testing.T) {
	startController(t)
	tb := newTable(t, "replay")
	doc := derivedPolicy("replay", "replay", "out", "one", true, false)
	doc = replaceOnce(t, doc, `"policy": "one"`, `"policy": "one", "op": request.operation, "old": oldObject == null ? "none" : oldObject.data.value`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("replay") })
	tb.trigger("a", "replay", "v1")
	cm := tb.waitFor("the downstream", "a-out", exists)
	if cm.Data["op"] != "CREATE" || cm.Data["old"] != "none" {
		t.Errorf("after a CREATE: op %q old %q", cm.Data["op"], cm.Data["old"])
	}
	tb.trigger("a", "replay", "v2")
	tb.waitFor("the UPDATE replayed with oldObject", "a-out", func(cm *corev1.ConfigMap) bool {
		return cm != nil && cm.Data["op"] == "UPDATE" && cm.Data["old"] == "v1" && cm.Data["from"] == "v2"
	})
}

// TestSubresourceRuleIsReportedAsUnobservable: a rule naming a subresource
// can never fire in a pull model; the policy says so and its other rules
// keep working.
func TestSubresourceRuleIsReportedAsUnobservable(t *testing.T) {
	startController(t)
	tb := newTable(t, "subresource")
	doc := derivedPolicy("subresource", "subresource", "out", "one", true, false)
	doc = replaceOnce(t, doc, `resources: ["configmaps"]`, `resources: ["configmaps", "pods/exec"]`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("subresource") })
	tb.trigger("a", "subresource", "a1")
	tb.waitFor("the downstream from the observable rule", "a-out", exists)
	poll(t, "the unobservable rule on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "subresource")
		return c != nil && c.Reason == reconcile.ReasonUnobservableTrigger &&
			strings.Contains(c.Message, `subresource "pods/exec" is only seen by admission webhooks`), err
	})
}
