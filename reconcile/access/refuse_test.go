package access

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretKind    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	roleBinding   = rbacv1.SchemeGroupVersion.WithKind("RoleBinding")
)

// generated is an object of kind gvk that trigger generated.
func generated(gvk schema.GroupVersionKind, namespace, name, trigger string, roleRef *rbacv1.RoleRef) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(map[string]string{sproutv1alpha1.LabelTriggerUID: trigger})
	if roleRef != nil {
		u.Object["roleRef"] = map[string]any{"apiGroup": rbacv1.GroupName, "kind": roleRef.Kind, "name": roleRef.Name}
	}
	return u
}

// TestRefuse: kinds outside AllowedKinds and bindings to roles that grant
// too much are refused, with their triggers failed; a RoleBinding in a
// protected namespace is judged as a ClusterRoleBinding; the bindings
// refused for their role are found among what the policy owns, to prune.
func TestRefuse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewClientset(
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "everything"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
	)
	r := New(Config{Kube: kube, Log: slog.New(slog.DiscardHandler), RoleChanged: func(string, bool) {},
		Options: Options{AllowedKinds: []schema.GroupKind{configMapKind.GroupKind(), roleBinding.GroupKind()}}})
	r.Protect("kube-system")
	secretReader := &rbacv1.RoleRef{Kind: "ClusterRole", Name: "secret-reader"}
	desired := []*unstructured.Unstructured{
		generated(configMapKind, "team", "cm", "t1", nil),
		generated(secretKind, "team", "s", "t2", nil),
		generated(roleBinding, "team", "reads-secrets", "t3", secretReader),
		generated(roleBinding, "kube-system", "reads-secrets", "t4", secretReader),
		generated(roleBinding, "team", "everything", "t5", &rbacv1.RoleRef{Kind: "ClusterRole", Name: "everything"}),
	}
	kinds := []schema.GroupVersionKind{configMapKind, secretKind, roleBinding, roleBinding, roleBinding}
	v, failed := NewVerdicts(), sets.New[string]()
	kept, keptKinds, errs, err := r.Refuse(ctx, ctx.Done(), desired, kinds, v, failed)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0].GetName() != "cm" || kept[1].GetNamespace() != "team" || keptKinds[1] != roleBinding {
		t.Errorf("kept %d objects, want the ConfigMap and the RoleBinding in team that reads its Secrets", len(kept))
	}
	if !failed.Equal(sets.New("t2", "t4", "t5")) {
		t.Errorf("failed triggers %v", sets.List(failed))
	}
	joined := errors.Join(errs...).Error()
	for _, want := range []string{"Secret/team/s: refused: kind Secret is not in --allowed-kinds",
		"RoleBinding/kube-system/reads-secrets: refused: roleRef: ClusterRole secret-reader grants get, list or watch on secrets in every namespace",
		"one of --protected-namespaces", "RoleBinding/team/everything: refused: roleRef: ClusterRole everything grants every verb on every resource"} {
		if !strings.Contains(joined, want) {
			t.Errorf("refusals:\n%s\nwant %q", joined, want)
		}
	}

	owned := []*cluster.Object{}
	for _, u := range desired {
		o, err := cluster.Generated(nil).FromList(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		owned = append(owned, o)
	}
	var names []string
	for _, o := range v.RefusedAmong(owned) {
		names = append(names, o.GetNamespace()+"/"+o.GetName())
	}
	if strings.Join(names, ",") != "kube-system/reads-secrets,team/everything" {
		t.Errorf("refused bindings owned: %v", names)
	}
	if AnyBinding(kinds[:2]) || !AnyBinding(kinds) {
		t.Error("AnyBinding")
	}
}
