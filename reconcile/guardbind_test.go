package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/reconcile"
)

// roleBinding is a RoleBinding to a Role or ClusterRole, as a CEL map
// literal for listPolicy.
func roleBinding(name, kind, role string) string {
	return fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": %q},
	  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": %q, "name": %q},
	  "subjects": [{"kind": "Group", "name": "guard-tenant", "apiGroup": "rbac.authorization.k8s.io"}]}`, name, kind, role)
}

// clusterRoleBinding is a ClusterRoleBinding, as a CEL map literal.
func clusterRoleBinding(name, role string) string {
	return strings.ReplaceAll(strings.Replace(roleBinding(name, "ClusterRole", role), `"RoleBinding"`, `"ClusterRoleBinding"`, 1), "\n", " ")
}

// createRole creates a ClusterRole, or a Role when ns is set, for the
// test's length.
func createRole(t *testing.T, ns, name string, labels map[string]string, aggregate map[string]string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	var err error
	if ns != "" {
		_, err = kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{})
		t.Cleanup(func() { _ = kube.RbacV1().Roles(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
	} else {
		role := &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules}
		if aggregate != nil {
			role.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: aggregate}}}
		}
		_, err = kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
		t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}) })
	}
	if err != nil {
		t.Fatal(err)
	}
}

// bindingExists reports whether the RoleBinding (ns set) or
// ClusterRoleBinding exists.
func bindingExists(ctx context.Context, ns, name string) (bool, error) {
	kube := kubernetes.NewForConfigOrDie(cfg)
	var err error
	if ns != "" {
		_, err = kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
	} else {
		_, err = kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func waitRefused(t *testing.T, policy, want string) {
	t.Helper()
	var last *metav1.Condition
	poll(t, "the refusal on the policy's status", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, policy)
		last = c
		return c != nil && c.Reason == reconcile.ReasonRefused && strings.Contains(c.Message, want), err
	})
	t.Logf("Ready: %s", last.Message)
}

func waitReady(t *testing.T, policy string) {
	t.Helper()
	poll(t, "the policy Ready", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, policy)
		return c != nil && c.Status == metav1.ConditionTrue, err
	})
}

func rbacRule(groups, resources, verbs []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
}

// TestGuardRefusesPowerfulRoles: a binding to a role that grants as much
// as "*" on "*", or lets its holder gain more than it names, is refused,
// named on the policy's status, and not written, whether the role says
// so with wildcards or not, is a Role, or aggregates the power: Sprout,
// whose rights the policy writes with, does not hold it. (Sprout holds
// bind, so a role granting bind is not refused here.)
func TestGuardRefusesPowerfulRoles(t *testing.T) {
	const ns = "guard-powers"
	tb := newTable(t, ns)
	runGuardedSprout(t, ns, nil)
	createRole(t, "", "guard-every-verb", nil, nil, rbacRule([]string{"*"}, []string{"*"},
		[]string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}))
	createRole(t, ns, "guard-escalate", nil, nil, rbacRule([]string{"rbac.authorization.k8s.io"}, []string{"roles"}, []string{"get", "escalate"}))
	createRole(t, "", "guard-impersonate", nil, nil, rbacRule([]string{""}, []string{"users", "groups"}, []string{"impersonate"}))
	createRole(t, "", "guard-star", map[string]string{"guard-powers-aggregate": "true"}, nil, rbacRule([]string{"*"}, []string{"*"}, []string{"*"}))
	createRole(t, "", "guard-aggregated", nil, map[string]string{"guard-powers-aggregate": "true"})
	createRole(t, "", "guard-read-secrets", nil, nil, rbacRule([]string{""}, []string{"secrets"}, []string{"get", "list", "watch"}))

	for _, tc := range []struct {
		// A ClusterRoleBinding when roleKind is empty.
		name, roleKind, role, want string
	}{
		{"every verb listed", "ClusterRole", "guard-every-verb", "ClusterRole guard-every-verb grants what Sprout does not hold in namespace guard-powers: get on *.*"},
		{"escalate", "Role", "guard-escalate", "Role guard-escalate grants what Sprout does not hold in namespace guard-powers: escalate on roles.rbac.authorization.k8s.io"},
		{"impersonate", "", "guard-impersonate", "ClusterRole guard-impersonate grants what Sprout does not hold in every namespace: impersonate on users; impersonate on groups"},
		{"aggregated", "ClusterRole", "guard-aggregated",
			"ClusterRole guard-aggregated (with the ClusterRoles it aggregates: guard-star) grants what Sprout does not hold in namespace guard-powers: * on *.*"},
		{"aggregation controller", "ClusterRole", "system:controller:clusterrole-aggregation-controller",
			"ClusterRole system:controller:clusterrole-aggregation-controller grants what Sprout does not hold in namespace guard-powers: escalate on clusterroles.rbac.authorization.k8s.io"},
		{"secrets cluster-wide", "", "guard-read-secrets", "ClusterRole guard-read-secrets grants what Sprout does not hold in every namespace: get on secrets; list on secrets; watch on secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := "guard-powers-" + strings.ReplaceAll(tc.name, " ", "-")
			binding, bindingNS := clusterRoleBinding(policy, tc.role), ""
			if tc.roleKind != "" {
				binding, bindingNS = roleBinding(policy, tc.roleKind, tc.role), ns
			}
			tb.applyPolicy(listPolicy(policy, policy, nil, binding))
			t.Cleanup(func() { tb.deletePolicy(policy) })
			itemsTrigger(t, tb.kube, ns, policy, policy, "a")
			tb.waitFor("the policy's ConfigMap", policy+"-a", exists)
			waitRefused(t, policy, tc.want)
			if ok, err := bindingExists(context.Background(), bindingNS, policy); ok || err != nil {
				t.Errorf("the refused binding was written (%v)", err)
			}
		})
	}
}

// TestGuardBindsHarmlessRoles: a policy that names an account binds what
// that account holds: Kubernetes' view, edit and admin in a namespace
// where it holds what they aggregate (which read its Secrets and act as
// its ServiceAccounts there), view cluster-wide, and a role on
// ConfigMaps. The account writes, so the API server judges the bindings
// too, as it would kubectl's.
func TestGuardBindsHarmlessRoles(t *testing.T) {
	const ns = "guard-harmless"
	tb := newTable(t, ns)
	runGuardedSprout(t, ns, func(o *reconcile.Options) { o.AllowUnnamedGrants, o.ServiceAccountNamespaces = false, []string{ns} })
	createRole(t, "", "guard-harmless-configmaps", nil, nil, rbacRule([]string{""}, []string{"configmaps"}, []string{"get", "list", "watch", "create", "patch", "delete"}))
	binder := "system:serviceaccount:" + ns + ":binder"
	createRole(t, "", "guard-harmless-writes", nil, nil, rbacRule([]string{rbacv1.GroupName}, []string{"rolebindings", "clusterrolebindings"},
		[]string{"get", "list", "watch", "create", "patch", "delete"}))
	for _, role := range []string{"guard-harmless-configmaps", "guard-harmless-writes", "system:aggregate-to-view"} {
		bindTo(t, "", "ClusterRole", role, binder)
	}
	for _, role := range []string{"system:aggregate-to-edit", "system:aggregate-to-admin"} {
		bindTo(t, ns, "ClusterRole", role, binder)
	}
	tb.applyPolicy(listPolicy("guard-harmless", "guard-harmless", map[string]string{reconcile.AnnotationServiceAccount: ns + "/binder"},
		roleBinding("guard-harmless-view", "ClusterRole", "view"),
		roleBinding("guard-harmless-edit", "ClusterRole", "edit"),
		roleBinding("guard-harmless-admin", "ClusterRole", "admin"),
		clusterRoleBinding("guard-harmless-view", "view"),
		clusterRoleBinding("guard-harmless-configmaps", "guard-harmless-configmaps"),
	))
	t.Cleanup(func() { tb.deletePolicy("guard-harmless") })
	itemsTrigger(t, tb.kube, ns, "t", "guard-harmless", "a")
	poll(t, "every binding", func(ctx context.Context) (bool, error) {
		for _, b := range []struct{ ns, name string }{
			{ns, "guard-harmless-view"}, {ns, "guard-harmless-edit"}, {ns, "guard-harmless-admin"},
			{"", "guard-harmless-view"}, {"", "guard-harmless-configmaps"},
		} {
			if ok, err := bindingExists(ctx, b.ns, b.name); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	waitReady(t, "guard-harmless")
}

// TestGuardRemovesBindingWhenRoleWidens: a role that grows powers the
// policy's identity (here Sprout) does not hold, after Sprout bound it,
// has its binding deleted at once, and the policy says why; the policy's
// other objects stay. Narrowed again, it is bound again. So for a Role
// given escalate, a ClusterRole widened to "*", and an aggregated
// ClusterRole that a powerful role joins.
func TestGuardRemovesBindingWhenRoleWidens(t *testing.T) {
	const ns = "guard-widen"
	tb := newTable(t, ns)
	runGuardedSprout(t, ns, nil)
	kube := tb.kube
	ctx := context.Background()
	configmaps := rbacRule([]string{""}, []string{"configmaps"}, []string{"get"})
	createRole(t, "", "guard-widen", nil, nil, configmaps)
	createRole(t, ns, "guard-widen", nil, nil, configmaps)
	createRole(t, "", "guard-widen-part", map[string]string{"guard-widen-aggregate": "true"}, nil, configmaps)
	createRole(t, "", "guard-widen-aggregated", nil, map[string]string{"guard-widen-aggregate": "true"})
	tb.applyPolicy(listPolicy("guard-widen", "guard-widen", nil,
		roleBinding("to-cluster-role", "ClusterRole", "guard-widen"),
		roleBinding("to-role", "Role", "guard-widen"),
		roleBinding("to-aggregated", "ClusterRole", "guard-widen-aggregated"),
	))
	t.Cleanup(func() { tb.deletePolicy("guard-widen") })
	itemsTrigger(t, kube, ns, "t", "guard-widen", "a")
	waitFor := func(what string, want map[string]bool) {
		t.Helper()
		poll(t, what, func(ctx context.Context) (bool, error) {
			for name, exists := range want {
				if ok, err := bindingExists(ctx, ns, name); ok != exists || err != nil {
					return false, err
				}
			}
			return true, nil
		})
	}
	waitFor("the three bindings", map[string]bool{"to-cluster-role": true, "to-role": true, "to-aggregated": true})
	waitReady(t, "guard-widen")

	// The Role given escalate.
	r, err := kube.RbacV1().Roles(ns).Get(ctx, "guard-widen", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Rules = append(r.Rules, rbacRule([]string{"rbac.authorization.k8s.io"}, []string{"clusterroles"}, []string{"escalate"}))
	if _, err := kube.RbacV1().Roles(ns).Update(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the binding to the widened Role deleted", map[string]bool{"to-cluster-role": true, "to-role": false, "to-aggregated": true})
	waitRefused(t, "guard-widen", "RoleBinding/guard-widen/to-role: refused: roleRef: Role guard-widen grants what Sprout does not hold in namespace guard-widen: escalate on clusterroles.rbac.authorization.k8s.io")

	// The ClusterRole widened to "*".
	role, err := kube.RbacV1().ClusterRoles().Get(ctx, "guard-widen", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules = append(role.Rules, rbacRule([]string{"*"}, []string{"*"}, []string{"*"}))
	if _, err := kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the binding to the widened ClusterRole deleted", map[string]bool{"to-cluster-role": false, "to-role": false, "to-aggregated": true})
	waitRefused(t, "guard-widen", "RoleBinding/guard-widen/to-cluster-role: refused: roleRef: ClusterRole guard-widen grants what Sprout does not hold in namespace guard-widen: * on *.*")

	// A powerful role joins the aggregated one.
	createRole(t, "", "guard-widen-joiner", map[string]string{"guard-widen-aggregate": "true"}, nil,
		rbacRule([]string{"rbac.authorization.k8s.io"}, []string{"clusterroles"}, []string{"escalate"}))
	waitFor("the binding to the aggregated role deleted", map[string]bool{"to-cluster-role": false, "to-role": false, "to-aggregated": false})
	waitRefused(t, "guard-widen", "RoleBinding/guard-widen/to-aggregated: refused: roleRef: ClusterRole guard-widen-aggregated (with the ClusterRoles it aggregates: guard-widen-joiner, guard-widen-part) grants what Sprout does not hold in namespace guard-widen: escalate on clusterroles.rbac.authorization.k8s.io")
	if tb.get("t-a") == nil {
		t.Error("the policy's ConfigMap was pruned with the bindings")
	}

	// Narrowed again, the ClusterRole is bound again.
	role, err = kube.RbacV1().ClusterRoles().Get(ctx, "guard-widen", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules = []rbacv1.PolicyRule{configmaps}
	if _, err := kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the binding to the narrowed ClusterRole again", map[string]bool{"to-cluster-role": true})
}

// TestGuardJudgesProtectedNamespacesAsTheCluster: in kube-system a
// RoleBinding to a role that only creates pods lets its holder run a pod
// as any of the cluster's controllers' ServiceAccounts there: it is judged
// as a ClusterRoleBinding, so the policy's identity (here Sprout, which
// may create pods in both namespaces, not cluster-wide) must hold the
// role's permissions cluster-wide. It binds in a tenant's namespace, and
// is refused in kube-system.
func TestGuardJudgesProtectedNamespacesAsTheCluster(t *testing.T) {
	tb := newTable(t, "guard-protected")
	runGuardedSprout(t, "guard-protected", nil)
	const policy = "guard-protected"
	pods := rbacRule([]string{""}, []string{"pods"}, []string{"create"})
	createRole(t, "", policy, nil, nil, pods)
	for _, ns := range []string{"guard-protected", "kube-system"} {
		bindTo(t, ns, "ClusterRole", policy, sproutOf("guard-protected"))
	}
	tb.applyPolicy(listPolicy(policy, policy, nil, roleBinding(policy, "ClusterRole", policy)))
	t.Cleanup(func() { tb.deletePolicy(policy) })
	kube := kubernetes.NewForConfigOrDie(cfg)
	itemsTrigger(t, kube, "guard-protected", policy, policy, "a")
	itemsTrigger(t, kube, "kube-system", policy, policy, "a")
	t.Cleanup(func() {
		_ = kube.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), policy, metav1.DeleteOptions{})
	})
	poll(t, "the binding in the tenant's namespace", func(ctx context.Context) (bool, error) { return bindingExists(ctx, "guard-protected", policy) })
	waitRefused(t, policy, "RoleBinding/kube-system/guard-protected: refused: roleRef: ClusterRole guard-protected grants what Sprout does not hold in every namespace: create on pods; "+
		"in namespace kube-system, one of --protected-namespaces, a RoleBinding is judged as a ClusterRoleBinding")
	if ok, err := bindingExists(context.Background(), "kube-system", policy); ok || err != nil {
		t.Errorf("the refused binding was written in kube-system (%v)", err)
	}
}
