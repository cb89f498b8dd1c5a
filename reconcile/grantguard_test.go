package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/reconcile"
)

// guardRules are what a Sprout that writes RBAC objects holds in these
// tests: deploy/'s rights for ConfigMaps, the RBAC kinds it writes, bind
// on roles (which a team needs before its policies can bind admin or
// edit) and impersonate on ServiceAccounts.
var guardRules = append(slices.Clone(sproutRules),
	rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "roles", "clusterrolebindings", "rolebindings"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "roles"}, Verbs: []string{"bind"}},
	rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
	rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
)

// sproutOf is the user of the ServiceAccount runGuardedSprout runs Sprout
// as, for the test namespace ns.
func sproutOf(ns string) string { return "system:serviceaccount:" + ns + ":sprout" }

// runGuardedSprout runs Sprout as ServiceAccount ns/sprout holding
// guardRules, RBAC on, its operator having opted in to policies that
// grant rights as Sprout itself (--allow-unnamed-grants): what is judged
// is whether Sprout holds what they grant. edit changes the options.
func runGuardedSprout(t *testing.T, ns string, edit func(*reconcile.Options)) {
	t.Helper()
	clusterGrant(t, kubernetes.NewForConfigOrDie(cfg), ns+"-sprout", ns, "sprout", guardRules)
	limited := rest.CopyConfig(cfg)
	limited.Impersonate = rest.ImpersonationConfig{UserName: sproutOf(ns)}
	runControllerOn(t, limited, func(o *reconcile.Options) {
		o.AllowUnnamedGrants = true
		if edit != nil {
			edit(o)
		}
	})
}

// bindTo binds role (a ClusterRole, or a Role of ns) to user in ns, or
// cluster-wide when ns is empty, for the test's length.
func bindTo(t *testing.T, ns, kind, role, user string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	name := "bind-" + strings.NewReplacer(":", "-").Replace(user) + "-" + strings.NewReplacer(":", "-").Replace(role)
	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}
	var err error
	if ns != "" {
		_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
		t.Cleanup(func() { _ = kube.RbacV1().RoleBindings(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	} else {
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
		t.Cleanup(func() {
			_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestGuardRefusesWhatSproutDoesNotHold: bindings to roles whose powers
// were on no list of the guard's, each a way to cluster-admin for whoever
// is bound, are refused because Sprout, whose rights the policy writes
// with, does not hold them: the guard asks the API server, permission by
// permission, subresources and URLs included.
func TestGuardRefusesWhatSproutDoesNotHold(t *testing.T) {
	const ns = "guard-unheld"
	tb := newTable(t, ns)
	runGuardedSprout(t, ns, nil)
	for _, tc := range []struct {
		name, want string
		rule       rbacv1.PolicyRule
	}{
		{"ephemeral containers", "patch on pods/ephemeralcontainers",
			rbacRule([]string{""}, []string{"pods/ephemeralcontainers"}, []string{"patch"})},
		{"webhooks", "create on mutatingwebhookconfigurations.admissionregistration.k8s.io",
			rbacRule([]string{"admissionregistration.k8s.io"}, []string{"mutatingwebhookconfigurations"}, []string{"create"})},
		{"every url", "* on URL /*", rbacv1.PolicyRule{NonResourceURLs: []string{"/*"}, Verbs: []string{"*"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := "guard-unheld-" + strings.ReplaceAll(tc.name, " ", "-")
			createRole(t, "", policy, nil, nil, tc.rule)
			tb.applyPolicy(listPolicy(policy, policy, nil, clusterRoleBinding(policy, policy)))
			t.Cleanup(func() { tb.deletePolicy(policy) })
			itemsTrigger(t, tb.kube, ns, policy, policy, "a")
			tb.waitFor("the policy's ConfigMap", policy+"-a", exists)
			waitRefused(t, policy, fmt.Sprintf("ClusterRoleBinding/%s: refused: roleRef: ClusterRole %s grants what Sprout does not hold in every namespace: %s",
				policy, policy, tc.want))
			if ok, err := bindingExists(context.Background(), "", policy); ok || err != nil {
				t.Errorf("the refused binding was written (%v)", err)
			}
		})
	}
}

// TestGuardRefusesJoiningAnAggregatedRole: a generated ClusterRole
// labelled to join edit, with bind on roles, would give every holder of
// edit (and of admin, which aggregates edit) the power to bind
// cluster-admin in their namespace. Sprout holds bind, so the API server
// lets it write the role; the guard refuses it, since Sprout may not
// escalate edit and admin, which is what adding rules to them needs. Once
// Sprout may, the ClusterRole is written; once another aggregated role
// that Sprout may not escalate selects it, it is deleted.
func TestGuardRefusesJoiningAnAggregatedRole(t *testing.T) {
	const ns = "guard-join"
	tb := newTable(t, ns)
	runGuardedSprout(t, ns, nil)
	const policy = "guard-join"
	joiner := `{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
	  "metadata": {"name": "guard-join", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
	  "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["bind"]}]}`
	tb.applyPolicy(listPolicy(policy, policy, nil, joiner))
	t.Cleanup(func() { tb.deletePolicy(policy) })
	itemsTrigger(t, tb.kube, ns, policy, policy, "a")
	tb.waitFor("the policy's ConfigMap", policy+"-a", exists)
	waitRefused(t, policy, "ClusterRole/guard-join: refused: metadata.labels: they add its rules to aggregated ClusterRoles, which Sprout may not extend: "+
		"escalate on clusterroles.rbac.authorization.k8s.io named admin; escalate on clusterroles.rbac.authorization.k8s.io named edit")
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.RbacV1().ClusterRoles().Get(context.Background(), "guard-join", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused ClusterRole: %v", err)
	}

	createRole(t, "", "guard-join-escalate-edit", nil, nil, rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName},
		Resources: []string{"clusterroles"}, ResourceNames: []string{"edit", "admin"}, Verbs: []string{"escalate"}})
	bindTo(t, "", "ClusterRole", "guard-join-escalate-edit", sproutOf(ns))
	poll(t, "the ClusterRole once Sprout may escalate edit and admin", func(ctx context.Context) (bool, error) {
		_, err := kube.RbacV1().ClusterRoles().Get(ctx, "guard-join", metav1.GetOptions{})
		return err == nil, notFoundIsNil(err)
	})

	createRole(t, "", "guard-join-later", nil, map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"})
	poll(t, "the ClusterRole deleted once a role Sprout may not escalate would aggregate it", func(ctx context.Context) (bool, error) {
		_, err := kube.RbacV1().ClusterRoles().Get(ctx, "guard-join", metav1.GetOptions{})
		return apierrors.IsNotFound(err), notFoundIsNil(err)
	})
	waitRefused(t, policy, "which Sprout may not extend: escalate on clusterroles.rbac.authorization.k8s.io named guard-join-later")
}

// TestUnnamedPolicyMayNotGrant: a GeneratingPolicy that names no account
// acts as Sprout itself, so its RoleBinding and its Deployment, which
// grant rights and run a workload, are refused, each naming the
// annotation and the flag, and its ConfigMap is written; with
// --allow-unnamed-grants they are written.
func TestUnnamedPolicyMayNotGrant(t *testing.T) {
	const ns = "grant-unnamed"
	tb := newTable(t, ns)
	deployment := `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": object.metadata.name + "-workload"},
	  "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": {"metadata": {"labels": {"app": "w"}},
	    "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]}}}}`
	for _, tc := range []struct {
		name    string
		allowed bool
	}{{"refused", false}, {"allowed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			runController(t, func(o *reconcile.Options) { o.AllowUnnamedGrants = tc.allowed })
			policy := "grant-unnamed-" + tc.name
			tb.applyPolicy(listPolicy(policy, policy, nil, roleBinding(policy, "ClusterRole", "view"), deployment))
			deleted := false
			t.Cleanup(func() {
				if !deleted {
					tb.deletePolicy(policy)
				}
			})
			itemsTrigger(t, tb.kube, ns, policy, policy, "a")
			tb.waitFor("the policy's ConfigMap", policy+"-a", exists)
			workload := func(ctx context.Context) (bool, error) {
				_, err := tb.kube.AppsV1().Deployments(ns).Get(ctx, policy+"-workload", metav1.GetOptions{})
				return err == nil, notFoundIsNil(err)
			}
			if tc.allowed {
				poll(t, "the binding and the Deployment", func(ctx context.Context) (bool, error) {
					ok, err := bindingExists(ctx, ns, policy)
					if !ok || err != nil {
						return false, err
					}
					return workload(ctx)
				})
				waitReady(t, policy)
				// Pruned while this Sprout runs: no other test's Sprout is
				// left to prune a Deployment it may not watch.
				tb.deletePolicy(policy)
				deleted = true
				poll(t, "the Deployment pruned with its policy", func(ctx context.Context) (bool, error) {
					ok, err := workload(ctx)
					return !ok, err
				})
				return
			}
			const flag = "and the policy acts as Sprout itself: name a ServiceAccount that holds them in " +
				"metadata.annotations[sprout.dev/service-account], or start Sprout with --allow-unnamed-grants"
			waitRefused(t, policy, "RoleBinding/"+ns+"/"+policy+": refused: it grants rights (an RBAC object), "+flag)
			waitRefused(t, policy, "Deployment/"+ns+"/"+policy+"-workload: refused: it grants rights (it runs a workload (spec.template.spec.containers)), "+flag)
			if ok, err := bindingExists(context.Background(), ns, policy); ok || err != nil {
				t.Errorf("the refused binding was written (%v)", err)
			}
			if ok, err := workload(context.Background()); ok || err != nil {
				t.Errorf("the refused Deployment was written (%v)", err)
			}
		})
	}
}
