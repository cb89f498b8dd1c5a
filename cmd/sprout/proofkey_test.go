package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestProofKeyIsMadeOnceAndKept: with the rights deploy/ gives it in its
// own namespace (create Secrets, get the one), Sprout makes its proof key
// when the Secret is absent, and reads the same key at every start after.
// A key too short to sign with is refused, naming the Secret.
func TestProofKeyIsMadeOnceAndKept(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	const ns = "sprout-system"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "sprout-proof-key"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{defaultProofKeySecret}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sprout-proof-key"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "sprout-proof-key"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "sprout"}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	asSprout := rest.CopyConfig(cp.Config)
	asSprout.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":sprout"}
	sprout := kubernetes.NewForConfigOrDie(asSprout)
	// The API server's authorizer reads RBAC from its own caches: the
	// binding holds once it says so.
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "get", Resource: "secrets", Name: defaultProofKeySecret},
		{Namespace: ns, Verb: "create", Resource: "secrets"},
	} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: asSprout.Impersonate.UserName, ResourceAttributes: &attrs}}
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			return err == nil && got.Status.Allowed, err
		}); err != nil {
			t.Fatalf("the binding of %s %s: %v", attrs.Verb, attrs.Resource, err)
		}
	}

	first, err := proofKey(ctx, sprout, ns, defaultProofKeySecret)
	if err != nil {
		t.Fatal(err)
	}
	again, err := proofKey(ctx, sprout, ns, defaultProofKeySecret)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != cluster.MinProofKeyBytes || !bytes.Equal(first, again) {
		t.Errorf("the key made (%d bytes) and the key read at the next start differ: %x, %x", len(first), first, again)
	}

	short := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "short"}, Data: map[string][]byte{proofKeyData: []byte("short")}}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, short, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := proofKey(ctx, admin, ns, "short"); err == nil || !strings.Contains(err.Error(), "--proof-key-secret: Secret sprout-system/short: data.key has 5 bytes") {
		t.Errorf("a 5-byte key: %v", err)
	}
}

// TestGlobalContextHidesTheProofKey: the store `sprout run` builds knows
// the key's Secret from --proof-key-secret and the Lease's namespace, and
// serves it to no urlPath entry.
func TestGlobalContextHidesTheProofKey(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	const ns, name = "sprout-home", "the-key"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := proofKey(ctx, admin, ns, name); err != nil {
		t.Fatal(err)
	}
	ro := runOptions{proofKeySecret: name, leader: leaderOptions{namespace: ns}}
	store, err := newGlobalContext(cp.Config, reconcile.DefaultOptions(), ro, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); store.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	entry := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v2beta1.GroupVersion.String(), "kind": v2beta1.Kind,
		"metadata": map[string]any{"name": "key"},
		"spec":     map[string]any{"apiCall": map[string]any{"urlPath": "/api/v1/namespaces/" + ns + "/secrets/" + name}},
	}}
	if _, err := dynamic.NewForConfigOrDie(cp.Config).Resource(v2beta1.Resource).Create(ctx, entry, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var v any
	var getErr error
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var found bool
		v, found, getErr = store.Get(ctx, "key", "")
		return found, nil
	}); err != nil {
		t.Fatal(err)
	}
	if v != nil || getErr == nil || !strings.Contains(getErr.Error(), "the server could not find the requested resource") {
		t.Fatalf("the proof key's Secret, read by a urlPath entry: want not found, got %v, %v", v, getErr)
	}
}
