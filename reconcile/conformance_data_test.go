package reconcile_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/reconcile"
)

// More of Kyverno's conformance scenarios (see conformance_test.go): data
// policies, a namespaceSelector on Namespace triggers, and namespaced
// policies.

// TestConformanceDataNoSyncDeletePolicy: a data object stays when its
// policy, without synchronize, is deleted.
func TestConformanceDataNoSyncDeletePolicy(t *testing.T) {
	c := newConformance(t)
	c.create(c.policy("generating-policies/data/nosync/nosync-delete-policy"))
	c.create("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: nosync-delete-policy-data\n  labels:\n    color: red\n")
	c.outlivesItsPolicy(configMapRef("nosync-delete-policy-data", "zk-kafka-address"), "policies.kyverno.io/v1", "nosync-delete-policy-data")
}

// managedNamespace is a Namespace, labelled as the selector wants or not.
func managedNamespace(name string, managed bool) string {
	doc := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n"
	if managed {
		doc += "  labels:\n    app.kubernetes.io/managed-by: my-app\n"
	}
	return doc
}

// TestConformanceMatchNamespaceWithNsSelector: a namespaceSelector selects
// a Namespace trigger by the Namespace's own labels, as the API server's
// admission does: a labelled Namespace gets the clone, at creation and,
// with generateExisting, when it existed before the policy; an unlabelled
// one gets nothing; synchronize brings a deleted clone back.
func TestConformanceMatchNamespaceWithNsSelector(t *testing.T) {
	c := newConformance(t)
	c.create(`
apiVersion: v1
kind: Namespace
metadata:
  name: source-namespace
---
apiVersion: v1
data:
  foo: YmFy
kind: Secret
metadata:
  name: secret-name
  namespace: source-namespace
type: Opaque
`)
	c.create(managedNamespace("existing-namespace", true))
	c.create(managedNamespace("unmanaged-namespace", false))
	c.create(c.policy("generating-policies/data/sync/match-namespace-with-ns-selector"))
	c.waitFor("the existing Namespace's clone", secretRef("existing-namespace", "secret-name"), present)
	c.create(managedNamespace("target-namespace", true))
	first := c.waitFor("the downstream", secretRef("target-namespace", "secret-name"), present)
	if u, err := c.get(context.Background(), secretRef("unmanaged-namespace", "secret-name")); err != nil || u != nil {
		t.Errorf("a Namespace the selector does not select got the clone (err %v)", err)
	}
	c.delete(secretRef("target-namespace", "secret-name"))
	c.waitFor("the downstream to be generated again", secretRef("target-namespace", "secret-name"), func(u *unstructured.Unstructured) bool {
		return u != nil && u.GetUID() != first.GetUID()
	})
}

// TestConformanceSyncTriggerStopsMatching: a synchronized object goes when
// its trigger is changed so that it no longer matches.
func TestConformanceSyncTriggerStopsMatching(t *testing.T) {
	c := newConformance(t)
	c.create(c.policy("generating-policies/data/sync/sync-trigger-stops-matching"))
	ns := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: sync-trigger-stops-matching\n  labels:\n    opt-in: "
	c.create(ns + `"true"` + "\n")
	cm := configMapRef("sync-trigger-stops-matching", "sync-trigger-stops-matching")
	c.waitFor("the downstream", cm, func(u *unstructured.Unstructured) bool {
		return u != nil && u.Object["data"].(map[string]any)["source"] == "GeneratingPolicy"
	})
	c.create(ns + `"false"` + "\n")
	c.waitFor("the downstream to go", cm, gone)
}

// TestConformanceSyncUpdateTriggerInPlace: a trigger's UPDATE updates its
// object in place, not by deleting and creating it again.
func TestConformanceSyncUpdateTriggerInPlace(t *testing.T) {
	c := newConformance(t)
	c.create(c.policy("generating-policies/data/sync/sync-update-trigger-in-place"))
	ns := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: sync-update-trigger-in-place\n"
	c.create(ns)
	cm := configMapRef("sync-update-trigger-in-place", "sync-update-trigger-in-place")
	quota := func(want string) func(*unstructured.Unstructured) bool {
		return func(u *unstructured.Unstructured) bool {
			return u != nil && u.Object["data"].(map[string]any)["QUOTA"] == want
		}
	}
	first := c.waitFor("the downstream", cm, quota("10"))
	c.create(ns + "  annotations:\n    quota: \"50\"\n")
	c.waitFor("the downstream to follow its trigger", cm, quota("50"))
	c.mustExist(cm, first.GetUID(), "the updated downstream")
}

// TestConformanceNamespacedCrossNamespaceDenied: a namespaced policy may
// not generate into another namespace. The scenario's policy triggers on
// Namespaces, which Sprout says can never trigger a namespaced policy; the
// same policy triggering on ConfigMaps of its namespace reaches
// generator.apply, which refuses the other namespace.
func TestConformanceNamespacedCrossNamespaceDenied(t *testing.T) {
	c := newConformance(t)
	c.create("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: test-namespace\n")
	grant(t, kubernetes.NewForConfigOrDie(cfg), "test-namespace", reconcile.DefaultServiceAccount, allVerbs, "configmaps")
	c.create(c.policy("namespaced-generating-policies/data/cross-namespace-denied"))
	reason := func(want, message string) {
		t.Helper()
		poll(t, "the policy's "+want, func(ctx context.Context) (bool, error) {
			cond, err := namespacedPolicyCondition(ctx, "test-namespace", "cross-ns-escalate")
			return cond != nil && cond.Reason == want && strings.Contains(cond.Message, message), notFoundIsNil(err)
		})
	}
	reason(reconcile.ReasonUnobservableTrigger, "namespaces.v1 is cluster-scoped and can never trigger a NamespacedGeneratingPolicy")
	c.create("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cross-ns-trigger\n")
	denied := configMapRef("default", "should-not-exist")
	if u, err := c.get(context.Background(), denied); err != nil || u != nil {
		t.Errorf("the namespaced policy generated into default (err %v)", err)
	}

	c.create(strings.Replace(c.policy("namespaced-generating-policies/data/cross-namespace-denied"), `resources:   ["namespaces"]`, `resources:   ["configmaps"]`, 1))
	c.create(configMapIn("test-namespace", "trigger"))
	reason(reconcile.ReasonEvaluationFailed, `cross-namespace generation denied: policy in "test-namespace" cannot generate into "default"`)
	if u, err := c.get(context.Background(), denied); err != nil || u != nil {
		t.Errorf("the namespaced policy generated into default (err %v)", err)
	}
}

// deployment is the scenario's Deployment, with replicas.
func deployment(name, replicas string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  namespace: test-15312
spec:
  replicas: ` + replicas + `
  selector:
    matchLabels:
      app: demo
  template:
    metadata:
      labels:
        app: demo
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
`
}

// TestConformanceNamespacedGeneratePDB: a namespaced policy with
// generateExisting generates for a Deployment older than it, and a later
// UPDATE of the Deployment keeps the PodDisruptionBudget.
func TestConformanceNamespacedGeneratePDB(t *testing.T) {
	c := newConformance(t)
	c.create("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: test-15312\n")
	// The policy runs as the namespace's account: Kyverno's background
	// controller is given the same rights in permissions.yaml.
	grantPDBs(t, "test-15312")
	c.create(deployment("demo", "1"))
	c.create(c.policy("namespaced-generating-policies/data/issue-15312-generate-pdb"))
	pdb := ref{"policy/v1", "PodDisruptionBudget", "test-15312", "demo-pdb"}
	first := c.waitFor("the existing Deployment's PDB", pdb, func(u *unstructured.Unstructured) bool {
		if u == nil {
			return false
		}
		labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		min, _, _ := unstructured.NestedInt64(u.Object, "spec", "minAvailable")
		return labels["app"] == "demo" && min == 1
	})
	c.create(deployment("demo", "2"))
	c.syncedPast(deployment("marker", "1"), ref{"policy/v1", "PodDisruptionBudget", "test-15312", "marker-pdb"})
	c.mustExist(pdb, first.GetUID(), "the PDB after its Deployment's update")
}

// grantPDBs gives the default account of ns what the PDB policy needs.
func grantPDBs(t *testing.T, ns string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	name, sa := "generate-pdb", reconcile.DefaultServiceAccount
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: allVerbs},
	}}
	if _, err := kube.RbacV1().Roles(ns).Create(context.Background(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rebind(t, kube, ns, name, sa)
}
