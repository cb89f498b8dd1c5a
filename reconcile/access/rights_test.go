package access

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// served is discovery as a test states it.
type served struct {
	lists       []*metav1.APIResourceList
	err         error
	invalidated int
}

func (s *served) Resources() ([]*metav1.APIResourceList, error) { return s.lists, s.err }
func (s *served) Invalidate()                                   { s.invalidated++ }

// coreV1 serves ConfigMaps, Secrets and Pods (with pods/exec) in
// namespaces, and Namespaces.
func coreV1() *served {
	watchable := []string{"get", "list", "watch", "create"}
	return &served{lists: []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Verbs: watchable},
		{Name: "secrets", Namespaced: true, Verbs: watchable},
		{Name: "pods", Namespaced: true, Verbs: watchable},
		{Name: "pods/exec", Namespaced: true, Verbs: []string{"create", "get"}},
		{Name: "namespaces", Verbs: watchable},
	}}}}
}

var (
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	pods       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// coreRule names resources of the core group, on CREATE.
func coreRule(resources ...string) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources},
	}}
}

// tenantPolicy is a NamespacedGeneratingPolicy of namespace team, acting as
// its default account, with rules.
func tenantPolicy(rules ...admissionregistrationv1.NamedRuleWithOperations) apiv1.Policy {
	return &apiv1.NamespacedGeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team"},
		Spec: apiv1.GeneratingPolicySpec{MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: rules}}}
}

// newRights answers reviews as allow says, from disco, with the accounts
// of tenants' policies "default" in their namespace.
func newRights(t *testing.T, disco Discovery, opts Options, allow func(user string, attrs *authorizationv1.ResourceAttributes) bool) *Rights {
	t.Helper()
	kube, _ := authorizer(allow)
	opts.Accounts.Default = DefaultServiceAccount
	return New(Config{Options: opts, Kube: kube, Log: slog.New(slog.DiscardHandler), Discovery: disco,
		WatchNamespace: func(scope string, gvr schema.GroupVersionResource) string {
			if gvr == namespaces {
				return ""
			}
			return scope
		},
		RoleChanged: func(string, bool) {}})
}

// noSecretsForTenants: Sprout may do anything; the tenants' accounts
// anything but read Secrets.
func noSecretsForTenants(user string, a *authorizationv1.ResourceAttributes) bool {
	return user == "sprout" || a.Resource != "secrets"
}

// TestResolveKeepsWhatSproutAndTheAccountMayRead: a wildcard expands to
// the watchable resources the policy's account may read, leaving out the
// others silently; a resource named outright that the account may not
// read is refused, a PermissionError that waits for RBAC.
func TestResolveKeepsWhatSproutAndTheAccountMayRead(t *testing.T) {
	r := newRights(t, coreV1(), Options{}, noSecretsForTenants)
	ctx := context.Background()
	triggers, refused, err := r.Resolve(ctx, tenantPolicy(coreRule("*")))
	if err != nil || !slices.Equal(triggers, []schema.GroupVersionResource{configmaps, pods}) || refused != nil {
		t.Errorf("a wildcard: triggers %v, refused %v, %v; want configmaps and pods alone", triggers, refused, err)
	}
	triggers, refused, err = r.Resolve(ctx, tenantPolicy(coreRule("configmaps", "secrets")))
	if !slices.Equal(triggers, []schema.GroupVersionResource{configmaps}) || !slices.Equal(refused, []schema.GroupVersionResource{secrets}) {
		t.Errorf("secrets named: triggers %v, refused %v", triggers, refused)
	}
	var permErr *PermissionError
	if !errors.As(err, &permErr) || !Blocked(err) || DiscoveryFailed(err) || !permErr.Stalls() ||
		!strings.Contains(err.Error(), "ServiceAccount team/default may not list secrets.v1 in namespace team") {
		t.Errorf("secrets named: %v, want a PermissionError naming the account", err)
	}
	if r.WaitsForPermission(err) {
		t.Error("a denial waits for an RBAC change that is not watched")
	}
}

// TestResolveReportsWhatCanNeverTrigger: subresources, CONNECT and a
// cluster-scoped resource a tenant's policy names are errors of the rules,
// not of discovery; the rest is watched.
func TestResolveReportsWhatCanNeverTrigger(t *testing.T) {
	r := newRights(t, coreV1(), Options{}, func(string, *authorizationv1.ResourceAttributes) bool { return true })
	rule := coreRule("pods", "pods/exec", "namespaces")
	rule.Operations = append(rule.Operations, admissionregistrationv1.Connect)
	triggers, _, err := r.Resolve(context.Background(), tenantPolicy(rule))
	if !slices.Equal(triggers, []schema.GroupVersionResource{pods}) {
		t.Errorf("triggers %v, want pods", triggers)
	}
	for _, want := range []string{`subresource "pods/exec"`, "operation CONNECT", "namespaces.v1 is cluster-scoped"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %s", err, want)
		}
	}
	if Blocked(err) {
		t.Errorf("the rules' own errors block the policy: %v", err)
	}
}

// TestResolveWhenDiscoveryFails: nothing matched asks discovery again; a
// group the rules name that did not answer is a DiscoveryError, asked of
// no account, while an unrelated group's failure is not.
func TestResolveWhenDiscoveryFails(t *testing.T) {
	asked := false
	disco := &served{err: errors.New("connection refused")}
	r := newRights(t, disco, Options{}, func(string, *authorizationv1.ResourceAttributes) bool { asked = true; return true })
	_, _, err := r.Resolve(context.Background(), tenantPolicy(coreRule("configmaps")))
	if !DiscoveryFailed(err) || !Blocked(err) || r.WaitsForPermission(err) || asked {
		t.Errorf("discovery down: %v (asked a review: %t), want a DiscoveryError", err, asked)
	}
	if disco.invalidated != 1 {
		t.Errorf("discovery invalidated %d times, want once", disco.invalidated)
	}
	metricsDown := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("503")}}
	up := coreV1()
	up.err = metricsDown
	r = newRights(t, up, Options{}, func(string, *authorizationv1.ResourceAttributes) bool { return true })
	if triggers, _, err := r.Resolve(context.Background(), tenantPolicy(coreRule("configmaps"))); err != nil || len(triggers) != 1 {
		t.Errorf("an unrelated group down: %v, %v", triggers, err)
	}
}

// TestActingAs: an account a policy may not name is invalid; one Sprout
// may not impersonate is denied, naming what Sprout lacks.
func TestActingAs(t *testing.T) {
	r := newRights(t, coreV1(), Options{}, func(user string, a *authorizationv1.ResourceAttributes) bool {
		return !(a.Verb == "impersonate" && a.Name == "powerful")
	})
	ctx := context.Background()
	p := tenantPolicy()
	if as, err := r.ActingAs(ctx, p); err != nil || as == nil || *as != (Account{Namespace: "team", Name: "default"}) {
		t.Errorf("the default account: %v, %v", as, err)
	}
	p.SetAnnotations(map[string]string{AnnotationServiceAccount: "other/deployer"})
	var invalid *InvalidAccountError
	if _, err := r.ActingAs(ctx, p); !errors.As(err, &invalid) {
		t.Errorf("another namespace's account: %v, want an InvalidAccountError", err)
	}
	p.SetAnnotations(map[string]string{AnnotationServiceAccount: "powerful"})
	var denied *DeniedError
	if _, err := r.ActingAs(ctx, p); !errors.As(err, &denied) || !strings.Contains(err.Error(), "may not impersonate ServiceAccount team/powerful") {
		t.Errorf("an account Sprout may not impersonate: %v", err)
	}
}

// TestCheckAsksWhereEachResourceIsWatched: what a policy read is asked
// where its informer watches (a cluster-scoped resource everywhere), and
// what it wrote with every verb of WriteVerbs.
func TestCheckAsksWhereEachResourceIsWatched(t *testing.T) {
	var where []string
	r := newRights(t, coreV1(), Options{}, func(user string, a *authorizationv1.ResourceAttributes) bool {
		if user != "sprout" && a.Verb != "impersonate" {
			where = append(where, a.Verb+" "+a.Resource+" in "+a.Namespace)
		}
		return user == "sprout" || a.Verb != "delete"
	})
	err := r.Check(context.Background(), tenantPolicy(), sets.New(namespaces), sets.New(configmaps))
	want := "Policy is not ready for reporting, missing permissions: ServiceAccount team/default may not delete configmaps.v1 in namespace team."
	if err == nil || err.Error() != want {
		t.Errorf("Check: %v\nwant %s", err, want)
	}
	if !slices.Contains(where, "list namespaces in ") || !slices.Contains(where, "patch configmaps in team") {
		t.Errorf("asked %q", where)
	}
}
