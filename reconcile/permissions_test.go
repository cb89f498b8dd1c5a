package reconcile_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// bindRole makes Role name in ns, granting verbs on the core resources,
// and binds it to ServiceAccount ns/sa.
func bindRole(t *testing.T, kube kubernetes.Interface, ns, name, sa string, verbs []string, resources ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: resources, Verbs: verbs},
	}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rebind(t, kube, ns, name, sa)
}

// rebind binds Role name in ns to ServiceAccount ns/sa.
func rebind(t *testing.T, kube kubernetes.Interface, ns, name, sa string) {
	t.Helper()
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kyvernoCondition returns the condition of type typ in a policy's
// status.conditionStatus, and conditionStatus.ready.
func kyvernoCondition(ctx context.Context, gvr schema.GroupVersionResource, ns, name, typ string) (*metav1.Condition, bool, error) {
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	p, err := apiv1.FromUnstructured(u)
	if err != nil {
		return nil, false, err
	}
	st := p.PolicyStatus().ConditionStatus
	return meta.FindStatusCondition(st.Conditions, typ), st.Ready != nil && *st.Ready, nil
}

// granted reports whether cond is Kyverno's true RBACPermissionsGranted.
func granted(cond *metav1.Condition) bool {
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "Succeeded" &&
		cond.Message == "Policy is ready for reporting."
}

// TestRevokedTriggerPermissionStopsThePolicy: a permission revoked from a
// policy's account while it runs makes RBACPermissionsGranted false, naming
// the verb and resource, and stops the informer serving the policy; the
// policy waits, without retrying, and granted again it reports Kyverno's
// true condition and generates, without a restart.
func TestRevokedTriggerPermissionStopsThePolicy(t *testing.T) {
	logs, c := runController(t, nil)
	tb := newTable(t, "perm-revoke")
	sa := reconcile.DefaultServiceAccount
	bindRole(t, tb.kube, tb.ns, "writes", sa, []string{"get", "create", "patch", "delete"}, "configmaps")
	bindRole(t, tb.kube, tb.ns, "reads", sa, []string{"get", "list", "watch"}, "configmaps")
	doc := fixtures.MustPolicyFile("derived", fixtures.Params{Name: "revoke", Namespace: "perm-revoke", App: "revoke",
		Suffix: "out", Value: "one", Synchronize: true})
	tb.applyPolicy(doc)
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace(tb.ns).Delete(context.Background(), "revoke", metav1.DeleteOptions{})
	})
	condition := func(ctx context.Context) (*metav1.Condition, bool, error) {
		return kyvernoCondition(ctx, apiv1.NamespacedGeneratingPolicies, tb.ns, "revoke", reconcile.ConditionRBACPermissionsGranted)
	}
	watched := func() bool {
		triggers, _ := c.Watched()
		return slices.Contains(triggers, "configmaps.v1 in perm-revoke")
	}
	tb.trigger("a", "revoke", "a1")
	tb.waitFor("the policy's object", "a-out", exists)
	poll(t, "RBACPermissionsGranted true", func(ctx context.Context) (bool, error) {
		cond, ready, err := condition(ctx)
		return granted(cond) && ready, err
	})

	if err := tb.kube.RbacV1().RoleBindings(tb.ns).Delete(context.Background(), "reads", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "RBACPermissionsGranted false, naming the verb and resource", func(ctx context.Context) (bool, error) {
		cond, ready, err := condition(ctx)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == "Failed" && !ready &&
			strings.Contains(cond.Message, "ServiceAccount perm-revoke/default may not list configmaps.v1 in namespace perm-revoke"), err
	})
	poll(t, "the policy's trigger informer to stop", func(context.Context) (bool, error) { return !watched(), nil })
	failures := strings.Count(logs.String(), `msg="sync failed" policy=NamespacedGeneratingPolicy/perm-revoke/revoke`)

	rebind(t, tb.kube, tb.ns, "reads", sa)
	poll(t, "RBACPermissionsGranted true again", func(ctx context.Context) (bool, error) {
		cond, ready, err := condition(ctx)
		return granted(cond) && ready, err
	})
	poll(t, "the policy's trigger informer again", func(context.Context) (bool, error) { return watched(), nil })
	tb.trigger("b", "revoke", "b1")
	tb.waitFor("the policy generating again", "b-out", exists)
	// While it waited, the policy was not retried: a retry logs its failure.
	if after := strings.Count(logs.String(), `msg="sync failed" policy=NamespacedGeneratingPolicy/perm-revoke/revoke`); after != failures {
		t.Errorf("the waiting policy was retried: %d failed syncs, %d before it was granted again", after, failures)
	}
}

// wildcardWatchingConfigMaps runs a controller and, in namespace ns, a
// NamespacedGeneratingPolicy "wild" triggering on every resource, whose
// account may list and watch ConfigMaps alone, once it watches them.
func wildcardWatchingConfigMaps(t *testing.T, ns string) (*reconcile.Controller, *table) {
	t.Helper()
	_, c := runController(t, nil)
	tb := newTable(t, ns)
	bindRole(t, tb.kube, tb.ns, "configmaps", reconcile.DefaultServiceAccount, []string{"list", "watch"}, "configmaps")
	tb.applyPolicy(fixtures.MustPolicyFile("wildcard", fixtures.Params{Name: "wild", Namespace: ns}))
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace(tb.ns).Delete(context.Background(), "wild", metav1.DeleteOptions{})
	})
	poll(t, "the policy's watches", func(context.Context) (bool, error) {
		got, _ := c.Watched()
		return slices.Equal(got, []string{"configmaps.v1 in " + ns}), nil
	})
	return c, tb
}

// TestWildcardPicksUpResourceGrantedLater: a policy triggering on every
// resource watches a resource its account is granted after it started.
func TestWildcardPicksUpResourceGrantedLater(t *testing.T) {
	c, tb := wildcardWatchingConfigMaps(t, "perm-wild")
	bindRole(t, tb.kube, tb.ns, "serviceaccounts", reconcile.DefaultServiceAccount, []string{"list", "watch"}, "serviceaccounts")
	poll(t, "the resource granted later watched", func(context.Context) (bool, error) {
		got, _ := c.Watched()
		return slices.Equal(got, []string{"configmaps.v1 in perm-wild", "serviceaccounts.v1 in perm-wild"}), nil
	})
}

// TestRecheckKeepsItsAnswerOverAStatusWrite: a permission recheck whose
// policy a status write replaced (with a copy of the same compilation)
// while its access reviews were asked keeps what it resolved on that copy:
// the resource granted is watched at once, not started and stopped by the
// release that follows the recheck (TestWildcardPicksUpResourceGrantedLater
// failed so, and nothing watched the resource until the next resync).
func TestRecheckKeepsItsAnswerOverAStatusWrite(t *testing.T) {
	c, tb := wildcardWatchingConfigMaps(t, "perm-race")
	sa := reconcile.DefaultServiceAccount
	bindRole(t, tb.kube, tb.ns, "serviceaccounts", sa, []string{"list", "watch"}, "serviceaccounts")
	poll(t, "the API server granting the account serviceaccounts", func(ctx context.Context) (bool, error) {
		return mayList(ctx, tb.kube, tb.ns, sa, "serviceaccounts")
	})
	if c.RecheckAfterStatusWrite(context.Background(), "NamespacedGeneratingPolicy/perm-race/wild", "serviceaccounts") {
		t.Skip("a recheck the RBAC watch asked for came first: nothing left to race")
	}
	if got, _ := c.Watched(); !slices.Equal(got, []string{"configmaps.v1 in perm-race", "serviceaccounts.v1 in perm-race"}) {
		t.Errorf("watched right after the recheck: %v, want the resource granted too", got)
	}
}

// mayList asks the API server whether ServiceAccount ns/sa may list
// resource (core group) in ns.
func mayList(ctx context.Context, kube kubernetes.Interface, ns, sa, resource string) (bool, error) {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + sa,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: resource}}}
	got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return got.Status.Allowed, nil
}

// TestClusterPolicyReportsSproutsOwnPermissions: a GeneratingPolicy that
// runs as Sprout reports Kyverno's true RBACPermissionsGranted when Sprout
// has the rights, and its checks are asked of the API server once, not per
// trigger or sync.
func TestClusterPolicyReportsSproutsOwnPermissions(t *testing.T) {
	_, c := runController(t, nil)
	tb := newTable(t, "perm-own")
	tb.applyPolicy(derivedPolicy("perm-own", "perm-own", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("perm-own") })
	tb.trigger("a", "perm-own", "a1")
	tb.waitFor("the policy's object", "a-out", exists)
	poll(t, "RBACPermissionsGranted true", func(ctx context.Context) (bool, error) {
		cond, ready, err := kyvernoCondition(ctx, apiv1.GeneratingPolicies, "", "perm-own", reconcile.ConditionRBACPermissionsGranted)
		return granted(cond) && ready, err
	})
	// The recheck that follows the start of the RBAC watch asks every
	// review again, once: what is counted starts after it.
	poll(t, "the first permission recheck", func(context.Context) (bool, error) { return c.PermissionRechecks() > 0, nil })
	before := c.AccessReviews()
	for _, name := range []string{"b", "c", "d", "e"} {
		tb.trigger(name, "perm-own", name)
		tb.waitFor("the policy's object", name+"-out", exists)
	}
	if after := c.AccessReviews(); after != before {
		t.Errorf("access reviews asked per trigger or sync: %d before four triggers, %d after", before, after)
	}
}

// sproutRules are what a Sprout running policies that generate ConfigMaps
// needs, as deploy/ grants them.
var sproutRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"policies.kyverno.io"}, Resources: []string{"generatingpolicies", "namespacedgeneratingpolicies"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"policies.kyverno.io"}, Resources: []string{"generatingpolicies/status", "namespacedgeneratingpolicies/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{"sprout.dev"}, Resources: []string{"policyinventories"}, Verbs: []string{"list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{"sprout.dev"}, Resources: []string{"policyinventories/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{"sprout.dev"}, Resources: []string{"policysources"}, Verbs: []string{"get", "create", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "roles", "clusterrolebindings", "rolebindings"}, Verbs: []string{"list", "watch"}},
}

// clusterGrant makes ClusterRole name with rules and binds it to
// ServiceAccount ns/sa; the test's end removes both.
func clusterGrant(t *testing.T, kube kubernetes.Interface, name, ns, sa string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// TestSproutWatchesOnlyWhatItMayList: a trigger kind, or a kind read with
// resource.List, that Sprout itself may not list and watch is not watched
// (no informer failing "forbidden" for ever): the policy says so and waits,
// and proceeds once Sprout is granted it, without a restart.
func TestSproutWatchesOnlyWhatItMayList(t *testing.T) {
	tb := newTable(t, "perm-self")
	clusterGrant(t, tb.kube, "perm-self-sprout", tb.ns, "sprout", sproutRules)
	limited := rest.CopyConfig(cfg)
	limited.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:perm-self:sprout"}
	_, c := runControllerOn(t, limited, nil)
	doc := replaceOnce(t, derivedPolicy("perm-self", "perm-self", "out", "one", true, false), `resources: ["configmaps"]`, `resources: ["secrets"]`)
	tb.applyPolicy(doc)
	t.Cleanup(func() { tb.deletePolicy("perm-self") })
	tb.applyPolicy(fixtures.MustPolicyFile("reads-secrets", fixtures.Params{Name: "perm-self-read", App: "perm-self-read"}))
	t.Cleanup(func() { tb.deletePolicy("perm-self-read") })
	tb.trigger("r", "perm-self-read", "r1")
	condition := func(ctx context.Context) (*metav1.Condition, bool, error) {
		return kyvernoCondition(ctx, apiv1.GeneratingPolicies, "", "perm-self", reconcile.ConditionRBACPermissionsGranted)
	}
	watched := func() bool {
		triggers, _ := c.Watched()
		return slices.Contains(triggers, "secrets.v1")
	}
	poll(t, "RBACPermissionsGranted false, naming Sprout's missing verb", func(ctx context.Context) (bool, error) {
		cond, _, err := condition(ctx)
		return cond != nil && cond.Status == metav1.ConditionFalse &&
			strings.Contains(cond.Message, "Sprout may not list secrets.v1 in every namespace"), err
	})
	poll(t, "the read Sprout may not make refused", func(ctx context.Context) (bool, error) {
		cond, err := policyCondition(ctx, "perm-self-read")
		return cond != nil && cond.Reason == reconcile.ReasonEvaluationFailed &&
			strings.Contains(cond.Message, "Sprout may not list secrets.v1 in every namespace"), err
	})
	if watched() {
		t.Error("a kind Sprout may not list is watched")
	}

	clusterGrant(t, tb.kube, "perm-self-secrets", tb.ns, "sprout", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}})
	poll(t, "RBACPermissionsGranted true", func(ctx context.Context) (bool, error) {
		cond, ready, err := condition(ctx)
		return granted(cond) && ready, err
	})
	poll(t, "the trigger kind watched", func(context.Context) (bool, error) { return watched(), nil })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: tb.ns, Labels: map[string]string{"app": "perm-self"}},
		Data: map[string][]byte{"value": []byte("a1")}}
	if _, err := tb.kube.CoreV1().Secrets(tb.ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the policy generating", "a-out", exists)
	tb.waitFor("the reading policy generating", "r-read", exists)
}
