package access

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// holdsOnly makes kube's SelfSubjectAccessReviews answer that Sprout
// holds get on ConfigMaps in namespace team, and nothing else; a review
// of fails fails.
func holdsOnly(kube *fake.Clientset, fails string) {
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		a := review.Spec.ResourceAttributes
		if a != nil && a.Resource == fails {
			return true, nil, errors.New("the API server is away")
		}
		review.Status.Allowed = a != nil && a.Verb == "get" && a.Group == "" && a.Resource == "configmaps" && a.Subresource == "" && a.Namespace == "team"
		return true, review, nil
	})
}

// TestGuardJudgesWhatAnAggregatedRoleWillGrant: a binding is judged by
// whether its writer holds every permission its role grants, with the
// roles it aggregates, at the binding's scope. A ClusterRole that grants
// nothing itself but aggregates one that grants bind is refused, the
// binding is kept as refused, and the aggregated role's later change is
// told to the Guard's owner, as the aggregating role's name and as any
// ClusterRole. A ClusterRole whose labels an aggregated role selects is
// refused to a writer who may not escalate that role. A review that fails
// refuses nothing.
func TestGuardJudgesWhatAnAggregatedRoleWillGrant(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	label := map[string]string{"aggregate-to-wide": "true"}
	kube := fake.NewClientset(
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wide", Labels: map[string]string{"aggregate-to-wider": "true"}},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: label}}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wider"},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"aggregate-to-wider": "true"}}}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "urls"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/*"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "binder", Labels: label},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: "team"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "lister", Namespace: "team"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}},
	)
	holdsOnly(kube, "secrets")
	type change struct {
		role    string
		cluster bool
	}
	changed := make(chan change, 16)
	rbac := NewRBAC(kube, NewReviews(kube.AuthorizationV1()), slog.New(slog.DiscardHandler))
	g := NewGuard(rbac, func(role string, cluster bool) { changed <- change{role, cluster} })
	if err := g.Caches(ctx, ctx.Done()); err != nil {
		t.Fatal(err)
	}
	v := NewVerdicts()
	err, failed := g.Judge(ctx, rbacv1.RoleRef{Kind: "ClusterRole", Name: "wide"}, "b", false, false, "team", nil, v)
	if failed != nil || err == nil || !strings.Contains(err.Error(), "with the ClusterRoles it aggregates: binder") ||
		!strings.Contains(err.Error(), "does not hold in namespace team: bind on clusterroles.rbac.authorization.k8s.io") {
		t.Errorf("the aggregating role: %v (%v)", err, failed)
	}
	if !v.Refused("RoleBinding", "team", "b") || !v.Refs().Has("ClusterRole/binder", true) || !v.Refs().Held {
		t.Errorf("refused %v, refs %v", v.AnyRefused(), v.Refs())
	}
	if err, failed := g.Judge(ctx, rbacv1.RoleRef{Kind: "Role", Name: "reader"}, "r", false, false, "team", nil, v); err != nil || failed != nil {
		t.Errorf("a Role whose permissions Sprout holds there: %v (%v)", err, failed)
	}
	if v.Refused("RoleBinding", "team", "r") || !v.Refs().Has("Role/team/reader", false) {
		t.Error("the Role's binding refused, or its role not kept")
	}
	if err, _ := g.Judge(ctx, rbacv1.RoleRef{Kind: "Role", Name: "reader"}, "p", false, true, "team", nil, v); err == nil ||
		!strings.Contains(err.Error(), "does not hold in every namespace: get on configmaps") {
		t.Errorf("the same Role judged as the cluster's: %v", err)
	}
	if err, _ := g.Judge(ctx, rbacv1.RoleRef{Kind: "Role", Name: "reader"}, "c", true, true, "", nil, v); err == nil {
		t.Error("a ClusterRoleBinding of a Role is not refused")
	}
	if err, failed := g.Judge(ctx, rbacv1.RoleRef{Kind: "Role", Name: "lister"}, "f", false, false, "team", nil, v); err != nil || failed == nil || v.Refused("RoleBinding", "team", "f") {
		t.Errorf("a review that failed: refused %v, failed %v", err, failed)
	}

	if err, _ := g.Judge(ctx, rbacv1.RoleRef{Kind: "ClusterRole", Name: "urls"}, "u", false, true, "team", nil, v); err != nil {
		t.Errorf("URLs, which no RoleBinding grants: %v", err)
	}
	if err, _ := g.Judge(ctx, rbacv1.RoleRef{Kind: "ClusterRole", Name: "urls"}, "u", true, true, "", nil, v); err == nil ||
		!strings.Contains(err.Error(), "does not hold in every namespace: get on URL /*") {
		t.Errorf("URLs from a ClusterRoleBinding: %v", err)
	}

	if err, failed := g.JudgeClusterRole(ctx, "joiner", label, nil, v); err == nil || failed != nil ||
		!strings.Contains(err.Error(), "which Sprout may not extend: escalate on clusterroles.rbac.authorization.k8s.io named wide; "+
			"escalate on clusterroles.rbac.authorization.k8s.io named wider") {
		t.Errorf("a ClusterRole that would join wide: %v (%v)", err, failed)
	}
	if !v.Refused("ClusterRole", "", "joiner") {
		t.Error("the joining ClusterRole is not kept as refused")
	}
	if err, failed := g.JudgeClusterRole(ctx, "alone", map[string]string{"other": "true"}, nil, v); err != nil || failed != nil {
		t.Errorf("a ClusterRole no aggregated role selects: %v (%v)", err, failed)
	}

	_, err = kube.RbacV1().ClusterRoles().Update(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "binder", Labels: map[string]string{}}}, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c := <-changed:
			if c.role != "ClusterRole/binder" {
				continue // the caches' first listing
			}
			if !c.cluster {
				t.Error("a ClusterRole's change told as a Role's")
			}
			return
		case <-timeout:
			t.Fatal("the aggregated role's change was not told")
		}
	}
}

// TestWritersImpersonateEachAccountOnce: each account's writer is made
// once, impersonating it; no account is Sprout's own writer.
func TestWritersImpersonateEachAccountOnce(t *testing.T) {
	var made []string
	w := NewWriters(&rest.Config{Host: "https://127.0.0.1:1"}, "sprout", func(cfg *rest.Config) (string, error) {
		made = append(made, cfg.Impersonate.UserName)
		return cfg.Impersonate.UserName, nil
	})
	a := &Account{Namespace: "team", Name: "deployer"}
	for range 2 {
		got, err := w.For(a)
		if err != nil || got != a.User() {
			t.Errorf("For(%s) = %q, %v", a, got, err)
		}
	}
	if own, _ := w.For(nil); own != "sprout" {
		t.Errorf("For(nil) = %q, want Sprout's own", own)
	}
	if len(made) != 1 {
		t.Errorf("writers made: %q, want one", made)
	}
}
