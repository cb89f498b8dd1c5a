package reconcile_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	startController(t)
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

// TestDefaultServiceAccountIsMandatory: with a default account, a policy
// that cannot name one is refused with the flag named.
func TestDefaultServiceAccountIsMandatory(t *testing.T) {
	runController(t, func(o *reconcile.Options) { o.DefaultServiceAccount = "generator" })
	tb := newTable(t, "imp-default")
	tb.applyPolicy(derivedPolicy("imp-default", "imp-default", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("imp-default") })
	poll(t, "the refusal on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "imp-default")
		return c != nil && c.Status == metav1.ConditionFalse &&
			strings.Contains(c.Message, `--default-service-account: "generator": a GeneratingPolicy needs namespace/name`), err
	})
}
