package main

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"k8s.io/client-go/rest"
)

// TestOwnNamespacesWhereverSproutRuns: outside a pod, Sprout's own
// namespace is still known: the API server says which ServiceAccount
// Sprout is, and the Lease's namespace, when named, counts too. Before,
// only a pod's namespace was protected, and a policy run with a
// kubeconfig could bind admin where Sprout's own token lives.
func TestOwnNamespacesWhereverSproutRuns(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	asSprout := rest.CopyConfig(cp.Config)
	asSprout.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:sprout-system:sprout"}
	got := ownNamespaces(context.Background(), asSprout, "leases", slog.New(slog.DiscardHandler))
	if !slices.Equal(got, []string{"leases", "sprout-system"}) {
		t.Errorf("own namespaces as a ServiceAccount, with a Lease namespace: %q", got)
	}
	if got := ownNamespaces(context.Background(), cp.Config, "", slog.New(slog.DiscardHandler)); len(got) != 0 {
		t.Errorf("own namespaces as a user that is no ServiceAccount: %q", got)
	}
	for user, want := range map[string]string{"system:serviceaccount:a:b": "a", "system:serviceaccount:a": "", "admin": ""} {
		if got := serviceAccountNamespace(user); got != want {
			t.Errorf("serviceAccountNamespace(%q) = %q, want %q", user, got, want)
		}
	}
}
