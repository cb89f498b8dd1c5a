package access

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// TestGuardJudgesWhatAnAggregatedRoleWillGrant: a ClusterRole that grants
// nothing itself but aggregates one that grants bind is refused, the
// binding is kept as refused, and the aggregated role's later change is
// told to the Guard's owner, as the aggregating role's name and as any
// ClusterRole.
func TestGuardJudgesWhatAnAggregatedRoleWillGrant(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	label := map[string]string{"aggregate-to-wide": "true"}
	kube := fake.NewClientset(
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wide"},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: label}}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "binder", Labels: label},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: "team"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}},
	)
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
	err := g.Judge(rbacv1.RoleRef{Kind: "ClusterRole", Name: "wide"}, "b", false, false, "team", v)
	if err == nil || !strings.Contains(err.Error(), "with the ClusterRoles it aggregates: binder") || !strings.Contains(err.Error(), "bind on roles") {
		t.Errorf("the aggregating role: %v", err)
	}
	if !v.Refused("RoleBinding", "team", "b") || !v.Refs().Has("ClusterRole/binder", true) {
		t.Errorf("refused %v, refs %v", v.AnyRefused(), v.Refs())
	}
	if err := g.Judge(rbacv1.RoleRef{Kind: "Role", Name: "reader"}, "r", false, false, "team", v); err != nil {
		t.Errorf("a Role that reads ConfigMaps: %v", err)
	}
	if v.Refused("RoleBinding", "team", "r") || !v.Refs().Has("Role/team/reader", false) {
		t.Error("the Role's binding refused, or its role not kept")
	}
	if err := g.Judge(rbacv1.RoleRef{Kind: "Role", Name: "reader"}, "c", true, true, "", v); err == nil {
		t.Error("a ClusterRoleBinding of a Role is not refused")
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
