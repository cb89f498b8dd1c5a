package access

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
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

// holdsSecretsIn makes kube's access reviews answer that Sprout, and
// ServiceAccount team/binder, hold get and list on Secrets in namespace
// team, and nothing else; Sprout may impersonate binder.
func holdsSecretsIn(kube *fake.Clientset) {
	allowed := func(a *authorizationv1.ResourceAttributes) bool {
		return a != nil && (a.Verb == "get" || a.Verb == "list") && a.Resource == "secrets" && a.Subresource == "" && a.Namespace == "team"
	}
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		a := review.Spec.ResourceAttributes
		review.Status.Allowed = allowed(a) || a != nil && a.Verb == "impersonate" && a.Name == "binder"
		return true, review, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		review.Status.Allowed = review.Spec.User == "system:serviceaccount:team:binder" && allowed(review.Spec.ResourceAttributes)
		return true, review, nil
	})
}

// TestRefuse: kinds outside AllowedKinds are refused; objects that grant
// rights are refused to a policy that acts as Sprout itself unless the
// operator allows it; bindings to roles whose permissions the policy's
// identity does not hold are refused, with their triggers failed; a
// RoleBinding in a protected namespace is judged as a ClusterRoleBinding;
// the bindings refused for their role are found among what the policy
// owns, to prune.
func TestRefuse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewClientset(
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "everything"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
	)
	holdsSecretsIn(kube)
	secretReader := &rbacv1.RoleRef{Kind: "ClusterRole", Name: "secret-reader"}
	desired := []*unstructured.Unstructured{
		generated(configMapKind, "team", "cm", "t1", nil),
		generated(secretKind, "team", "s", "t2", nil),
		generated(roleBinding, "team", "reads-secrets", "t3", secretReader),
		generated(roleBinding, "kube-system", "reads-secrets", "t4", secretReader),
		generated(roleBinding, "team", "everything", "t5", &rbacv1.RoleRef{Kind: "ClusterRole", Name: "everything"}),
	}
	kinds := []schema.GroupVersionKind{configMapKind, secretKind, roleBinding, roleBinding, roleBinding}
	unnamed := &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	named := &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{AnnotationServiceAccount: "team/binder"}}}
	for _, tc := range []struct {
		name     string
		policy   apiv1.Policy
		unnamed  bool
		identity string
	}{
		{name: "Sprout itself, allowed", policy: unnamed, unnamed: true, identity: "Sprout"},
		{name: "a named account", policy: named, identity: "ServiceAccount team/binder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{Kube: kube, Log: slog.New(slog.DiscardHandler), RoleChanged: func(string, bool) {},
				Options: Options{AllowedKinds: []schema.GroupKind{configMapKind.GroupKind(), roleBinding.GroupKind()},
					AllowUnnamedGrants: tc.unnamed, Accounts: Accounts{Namespaces: []string{"team"}}}})
			r.Protect("kube-system")
			v, failed := NewVerdicts(), sets.New[string]()
			kept, keptKinds, errs, err := r.Refuse(ctx, ctx.Done(), tc.policy, desired, kinds, v, failed)
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
				"RoleBinding/kube-system/reads-secrets: refused: roleRef: ClusterRole secret-reader grants what " + tc.identity +
					" does not hold in every namespace: get on secrets; list on secrets",
				"one of --protected-namespaces", "RoleBinding/team/everything: refused: roleRef: ClusterRole everything grants what " +
					tc.identity + " does not hold in namespace team: * on *.*"} {
				if !strings.Contains(joined, want) {
					t.Errorf("refusals:\n%s\nwant %q", joined, want)
				}
			}
			var names []string
			for _, o := range v.RefusedAmong(owned(t, desired)) {
				names = append(names, o.GetNamespace()+"/"+o.GetName())
			}
			if strings.Join(names, ",") != "kube-system/reads-secrets,team/everything" {
				t.Errorf("refused bindings owned: %v", names)
			}
		})
	}

	t.Run("Sprout itself, not allowed", func(t *testing.T) {
		r := New(Config{Kube: kube, Log: slog.New(slog.DiscardHandler), RoleChanged: func(string, bool) {}})
		v, failed := NewVerdicts(), sets.New[string]()
		kept, _, errs, err := r.Refuse(ctx, ctx.Done(), unnamed, desired, kinds, v, failed)
		if err != nil {
			t.Fatal(err)
		}
		if len(kept) != 2 || !failed.Equal(sets.New("t3", "t4", "t5")) || v.AnyRefused() {
			t.Errorf("kept %d objects, failed %v, refused for their role %v; want the ConfigMap and the Secret, the bindings refused unjudged",
				len(kept), sets.List(failed), v.AnyRefused())
		}
		want := "RoleBinding/team/reads-secrets: refused: it grants rights (an RBAC object), and the policy acts as Sprout itself: " +
			"name a ServiceAccount that holds them in metadata.annotations[sprout.dev/service-account], or start Sprout with --allow-unnamed-grants"
		if joined := errors.Join(errs...).Error(); !strings.Contains(joined, want) {
			t.Errorf("refusals:\n%s\nwant %q", joined, want)
		}
	})
	if Rejudged(kinds[:2]) || !Rejudged(kinds) || !Rejudged([]schema.GroupVersionKind{rbacv1.SchemeGroupVersion.WithKind("ClusterRole")}) {
		t.Error("Rejudged")
	}
}

// owned are desired as the objects a policy owns.
func owned(t *testing.T, desired []*unstructured.Unstructured) []*cluster.Object {
	t.Helper()
	out := []*cluster.Object{}
	for _, u := range desired {
		o, err := cluster.Generated(nil).FromList(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}
