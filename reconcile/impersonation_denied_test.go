package reconcile_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestAccountSproutMayNotImpersonateIsRefused: a tenant's policy names an
// account of its namespace that may read and write there but that Sprout
// may not impersonate. Sprout acts as it in nothing, reads included: the
// policy watches nothing, generates nothing, and says which grant Sprout
// lacks. Reads were authorized by an access review of the account alone,
// so such a policy watched its triggers and failed only at its first write,
// with "failed to get server groups: unknown".
func TestAccountSproutMayNotImpersonateIsRefused(t *testing.T) {
	tb := newTable(t, "imp-deny")
	clusterGrant(t, tb.kube, "imp-deny-sprout", tb.ns, "sprout", sproutRules)
	grant(t, tb.kube, tb.ns, "tenant", allVerbs, "configmaps", "secrets")
	limited := rest.CopyConfig(cfg)
	limited.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:imp-deny:sprout"}
	_, c := runControllerOn(t, limited, func(o *reconcile.Options) { o.DefaultServiceAccount = "" })
	doc := fixtures.MustPolicyFile("derived", fixtures.Params{Name: "tenant", Namespace: tb.ns, App: "tenant",
		Suffix: "out", Value: "one", Synchronize: true})
	doc = strings.Replace(doc, "metadata:\n", "metadata:\n  annotations: {\"sprout.dev/service-account\": \"tenant\"}\n", 1)
	tb.applyPolicy(doc)
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(cfg).Resource(apiv1.NamespacedGeneratingPolicies).Namespace(tb.ns).Delete(context.Background(), "tenant", metav1.DeleteOptions{})
	})
	tb.trigger("a", "tenant", "a1")
	const want = "Sprout may not impersonate ServiceAccount imp-deny/tenant"
	poll(t, "the policy refused, naming the grant Sprout lacks", func(ctx context.Context) (bool, error) {
		cond, err := namespacedPolicyCondition(ctx, tb.ns, "tenant")
		return cond != nil && cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, want), err
	})
	if watched, _ := c.Watched(); slices.Contains(watched, "configmaps.v1 in imp-deny") {
		t.Errorf("the policy watches as an account Sprout may not impersonate: %v", watched)
	}
	if cm, err := getConfigMap(context.Background(), tb.ns, "a-out"); err != nil || cm != nil {
		t.Errorf("generated as an account Sprout may not impersonate: %v, %v", cm, err)
	}
}
