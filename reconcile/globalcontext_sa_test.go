package reconcile_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// A policy that runs as a ServiceAccount reads a kubernetesResource entry
// only if the account may list what the entry caches: the entry's informer
// runs with Sprout's rights, which must not leak to the account.
func TestGlobalContextEntryReadAsThePolicyAccount(t *testing.T) {
	runGlobalContext(t, nil, func(o *reconcile.Options) { o.ServiceAccountNamespaces = []string{"gctx-sa"} })
	tb := newTable(t, "gctx-sa")
	ctx := context.Background()
	if _, err := tb.kube.CoreV1().ServiceAccounts("gctx-sa").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// ConfigMaps only: its triggers, the objects it writes, and an entry's.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gctx-sa-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	}}
	if _, err := tb.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tb.kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gctx-sa-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: "gctx-sa"}}}
	if _, err := tb.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tb.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	if _, err := tb.kube.CoreV1().Secrets("gctx-sa").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"},
		StringData: map[string]string{"token": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{`apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-sa-secrets
spec:
  kubernetesResource: {version: v1, resource: secrets, namespace: gctx-sa}
`, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-sa-secret-path
spec:
  apiCall: {urlPath: /api/v1/namespaces/gctx-sa/secrets/token, refreshInterval: 1s}
`, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-sa-configmaps
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: gctx-sa}
`} {
		applyEntry(t, doc)
	}
	asReader := func(name, expr string) string {
		return fixtures.MustPolicyFile("expression", fixtures.Params{Name: name, App: name, Source: "gctx-sa", Expression: expr,
			Annotations: map[string]string{"sprout.dev/service-account": "gctx-sa/reader"}})
	}

	tb.applyPolicy(asReader("gctx-sa-allowed", `globalContext.Get("gctx-sa-configmaps", "").exists(o, o.metadata.name == "seen") ? "seen" : "not yet"`))
	t.Cleanup(func() { tb.deletePolicy("gctx-sa-allowed") })
	tb.trigger("seen", "gctx-sa-allowed", "x")
	tb.waitFor("an entry the account may list", "seen-out", hasValue("seen"))

	tb.applyPolicy(asReader("gctx-sa-refused", `globalContext.Get("gctx-sa-secrets", "")[0].data.token`))
	t.Cleanup(func() { tb.deletePolicy("gctx-sa-refused") })
	tb.trigger("steal", "gctx-sa-refused", "x")
	poll(t, "the refused entry on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "gctx-sa-refused")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed && strings.Contains(c.Message, `globalContext.Get("gctx-sa-secrets")`) &&
			strings.Contains(c.Message, "ServiceAccount gctx-sa/reader may not list secrets.v1 in namespace gctx-sa"), err
	})
	// A urlPath is read with Sprout's rights too, and served only to a
	// policy whose account may make the same read.
	tb.applyPolicy(asReader("gctx-sa-path-refused", `string(globalContext.Get("gctx-sa-secret-path", "").data.token)`))
	t.Cleanup(func() { tb.deletePolicy("gctx-sa-path-refused") })
	tb.trigger("steal-path", "gctx-sa-path-refused", "x")
	poll(t, "the refused urlPath entry on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "gctx-sa-path-refused")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed && strings.Contains(c.Message, `globalContext.Get("gctx-sa-secret-path")`) &&
			strings.Contains(c.Message, "ServiceAccount gctx-sa/reader may not get secrets.v1 in namespace gctx-sa"), err
	})
	for _, name := range []string{"steal-out", "steal-path-out"} {
		if tb.get(name) != nil {
			t.Errorf("the account read a Secret through an entry (%s)", name)
		}
	}
}
