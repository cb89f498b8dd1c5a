package reconcile_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

const impersonatedPolicy = `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: %NAME%
  annotations: {"sprout.dev/service-account": "imp/generator"}
spec:
  evaluation:
    synchronize: {enabled: true}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
    objectSelector:
      matchLabels: {app: %NAME%}
  generate:
  - expression: >-
      generator.Apply("imp", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": object.metadata.name + "-here"}}])
  - expression: >-
      generator.Apply(%TARGET%, [%OBJECT%])
`

// TestPolicyRunsAsItsServiceAccount: a policy annotated with a
// ServiceAccount writes, and reads through resource.Get, as that account:
// what its RBAC forbids is reported, what it allows is written.
func TestPolicyRunsAsItsServiceAccount(t *testing.T) {
	runController(t, func(o *reconcile.Options) { o.ServiceAccountNamespaces = []string{"imp"} })
	tb := newTable(t, "imp")
	createNamespace(t, "imp-other", nil)
	ctx := context.Background()
	if _, err := tb.kube.CoreV1().ServiceAccounts("imp").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "generator"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "generator", Namespace: "imp"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	}}
	if _, err := tb.kube.RbacV1().Roles("imp").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "generator", Namespace: "imp"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "generator"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "generator", Namespace: "imp"}}}
	if _, err := tb.kube.RbacV1().RoleBindings("imp").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A cluster policy's triggers come from every namespace: its account
	// must be able to read them all.
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "imp-generator-reads"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}},
	}}
	if _, err := tb.kube.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readerBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "imp-generator-reads"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "imp-generator-reads"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "generator", Namespace: "imp"}}}
	if _, err := tb.kube.RbacV1().ClusterRoleBindings().Create(ctx, readerBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := func(name, target, object string) string {
		return strings.NewReplacer("%NAME%", name, "%TARGET%", target, "%OBJECT%", object).Replace(impersonatedPolicy)
	}

	// A write the account may not make.
	tb.applyPolicy(policy("imp-write", `"imp-other"`, `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "elsewhere"}}`))
	t.Cleanup(func() { tb.deletePolicy("imp-write") })
	tb.trigger("w", "imp-write", "w")
	tb.waitFor("the object the account may write", "w-here", exists)
	poll(t, "the forbidden write on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "imp-write")
		return c != nil && c.Reason == reconcile.ReasonApplyFailed && strings.Contains(c.Message, "ConfigMap/imp-other/elsewhere") &&
			strings.Contains(c.Message, `"system:serviceaccount:imp:generator" cannot`), err
	})
	if _, err := tb.kube.CoreV1().ConfigMaps("imp-other").Get(ctx, "elsewhere", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the forbidden object: %v", err)
	}

	// A read the account may not make.
	tb.applyPolicy(policy("imp-read", `"imp"`, `resource.Get("v1", "secrets", "imp", "token").setField("metadata.name", "stolen")`))
	t.Cleanup(func() { tb.deletePolicy("imp-read") })
	tb.trigger("r", "imp-read", "r")
	poll(t, "the forbidden read on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "imp-read")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed &&
			strings.Contains(c.Message, "ServiceAccount imp/generator may not get secrets.v1 in namespace imp"), err
	})
}

// grant gives ServiceAccount ns/sa the verbs on the core resources, in ns.
func grant(t *testing.T, kube kubernetes.Interface, ns, sa string, verbs []string, resources ...string) {
	t.Helper()
	ctx := context.Background()
	name := "grant-" + sa
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: resources, Verbs: verbs},
	}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var allVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}

// TestClusterPolicyMayNotNameAnyAccount: a GeneratingPolicy that names a
// ServiceAccount of a namespace the operator did not list is refused, with
// its own reason (it compiles), the annotation and the flag named, and
// generates nothing: naming a powerful
// account in kube-system would hand its rights to the policy's author.
func TestClusterPolicyMayNotNameAnyAccount(t *testing.T) {
	_, c := runController(t, func(o *reconcile.Options) { o.ServiceAccountNamespaces = []string{"imp-allowed"} })
	tb := newTable(t, "imp-bounded")
	doc := replaceOnce(t, derivedPolicy("imp-bounded", "imp-bounded", "out", "one", true, false),
		"  name: imp-bounded\n", "  name: imp-bounded\n  annotations: {\"sprout.dev/service-account\": \"kube-system/powerful\"}\n")
	doc = replaceOnce(t, doc, `resources: ["configmaps"]`, `resources: ["configmaps", "limitranges"]`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("imp-bounded") })
	tb.trigger("a", "imp-bounded", "a1")
	poll(t, "the refusal on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "imp-bounded")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reconcile.ReasonInvalidServiceAccount &&
			strings.Contains(c.Message, `metadata.annotations[sprout.dev/service-account]: "kube-system/powerful": namespace "kube-system" is not one whose accounts GeneratingPolicies may run as (--service-account-namespaces)`), err
	})
	if tb.get("a-out") != nil {
		t.Error("a policy naming an account it may not use generated an object")
	}
	// Nor does Sprout watch its triggers, with its own rights, meanwhile.
	if triggers, _ := c.Watched(); slices.Contains(triggers, "limitranges.v1") {
		t.Errorf("a policy naming an account it may not use is watched: %v", triggers)
	}
}

// TestNamespacedPolicyRunsAsItsNamespaceAccount: a NamespacedGeneratingPolicy
// that names no account runs as "default" of its namespace: it writes what
// that account may write, and a RoleBinding that would give the tenant
// admin in the namespace, which Sprout itself could write, is refused: the
// account does not hold what admin grants.
func TestNamespacedPolicyRunsAsItsNamespaceAccount(t *testing.T) {
	startController(t)
	tb := newTable(t, "imp-tenant")
	grant(t, tb.kube, "imp-tenant", reconcile.DefaultServiceAccount, allVerbs, "configmaps")
	// Besides what the account may write, a binding of the tenant to admin.
	doc := fixtures.MustPolicyFile("derived", fixtures.Params{Name: "tenant", Namespace: "imp-tenant", App: "tenant",
		Suffix: "out", Value: "one", Synchronize: true,
		Extra: `{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "tenant-admin"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "tenant"}]}`})
	tb.applyPolicy(doc)
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace("imp-tenant").Delete(context.Background(), "tenant", metav1.DeleteOptions{})
	})
	tb.trigger("a", "tenant", "a1")
	tb.waitFor("the object the namespace's account may write", "a-out", exists)
	poll(t, "the forbidden binding on the policy", func(ctx context.Context) (bool, error) {
		c, err := namespacedPolicyCondition(ctx, "imp-tenant", "tenant")
		return c != nil && c.Reason == reconcile.ReasonRefused && strings.Contains(c.Message, "RoleBinding/imp-tenant/tenant-admin: refused") &&
			strings.Contains(c.Message, "grants what ServiceAccount imp-tenant/default does not hold in namespace imp-tenant"), err
	})
	if _, err := tb.kube.RbacV1().RoleBindings("imp-tenant").Get(context.Background(), "tenant-admin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the tenant's policy bound the tenant to admin: %v", err)
	}
}

// TestNamespacedPolicyWatchesOnlyWhatItsAccountMayList: a
// NamespacedGeneratingPolicy triggering on every resource watches only in
// its namespace, only the resources its account may list and watch there,
// and none cluster-scoped.
func TestNamespacedPolicyWatchesOnlyWhatItsAccountMayList(t *testing.T) {
	_, c := runController(t, nil)
	tb := newTable(t, "imp-wild")
	grant(t, tb.kube, "imp-wild", reconcile.DefaultServiceAccount, []string{"list", "watch"}, "configmaps", "serviceaccounts")
	grant(t, tb.kube, "imp-wild", "writer", allVerbs, "configmaps") // another account's rights do not count
	doc := fixtures.MustPolicyFile("wildcard", fixtures.Params{Name: "wild", Namespace: "imp-wild"})
	tb.applyPolicy(doc)
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace("imp-wild").Delete(context.Background(), "wild", metav1.DeleteOptions{})
	})
	want := []string{"configmaps.v1 in imp-wild", "serviceaccounts.v1 in imp-wild"}
	var got []string
	poll(t, "the policy's watches", func(context.Context) (bool, error) {
		got, _ = c.Watched()
		return slices.Equal(got, want), nil
	})
}

// TestDeletedNamespacedPolicyPrunesOnlyWhatItMayPrune: a tenant who
// stamps their namespaced policy's origin on an object of another
// namespace, then deletes the policy, does not get Sprout to delete that
// object: the last sync of a namespaced policy looks in its namespace only,
// and prunes as the policy's account.
func TestDeletedNamespacedPolicyPrunesOnlyWhatItMayPrune(t *testing.T) {
	startController(t)
	tb := newTable(t, "imp-fin")
	createNamespace(t, "imp-fin-other", nil)
	grant(t, tb.kube, "imp-fin", reconcile.DefaultServiceAccount, allVerbs, "configmaps")
	tb.applyPolicy(fixtures.MustPolicyFile("derived", fixtures.Params{Name: "fin", Namespace: "imp-fin", App: "fin",
		Suffix: "out", Value: "one", Synchronize: true}))
	tb.trigger("a", "fin", "a1")
	tb.waitFor("the policy's object", "a-out", exists)
	ctx := context.Background()
	victim := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: "imp-fin-other",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "sprout", "generate.kyverno.io/policy-name": "fin",
			"sprout.dev/policy-namespace": "imp-fin"},
		Annotations: map[string]string{"sprout.dev/policy": "NamespacedGeneratingPolicy/imp-fin/fin"},
	}}
	if _, err := tb.kube.CoreV1().ConfigMaps("imp-fin-other").Create(ctx, victim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace("imp-fin").Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the policy's object to go with it", "a-out", absent)
	if _, err := tb.kube.CoreV1().ConfigMaps("imp-fin-other").Get(ctx, "victim", metav1.GetOptions{}); err != nil {
		t.Errorf("the object of another namespace stamped with the policy's origin: %v", err)
	}
}

// TestImpersonatedCreatesArePaired: an object a policy creates as its
// ServiceAccount is cached as Sprout's own creates are: the version the
// create made as desired is paired with its watch event and kept released
// (without its JSON). The policy does not synchronize, so no later sync
// finds it unchanged and releases it: only the pairing can.
func TestImpersonatedCreatesArePaired(t *testing.T) {
	_, c := runController(t, nil)
	tb := newTable(t, "imp-paired")
	grant(t, tb.kube, "imp-paired", reconcile.DefaultServiceAccount, allVerbs, "configmaps")
	doc := fixtures.MustPolicyFile("derived", fixtures.Params{Name: "paired", Namespace: "imp-paired", App: "paired",
		Suffix: "out", Value: "one"})
	tb.applyPolicy(doc)
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace("imp-paired").Delete(context.Background(), "paired", metav1.DeleteOptions{})
	})
	tb.trigger("a", "paired", "a1")
	made := tb.waitFor("the object the namespace's account creates", "a-out", exists)
	if !slices.ContainsFunc(made.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
		return e.Operation == metav1.ManagedFieldsOperationUpdate && e.Manager == sproutv1alpha1.FieldManager
	}) {
		t.Fatalf("not made by a create of Sprout's: %v", made.ManagedFields)
	}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	poll(t, "the created version cached released", func(context.Context) (bool, error) {
		cached, released := c.CachedRelease(configMaps, "imp-paired", "a-out")
		return cached && released, nil
	})
}
