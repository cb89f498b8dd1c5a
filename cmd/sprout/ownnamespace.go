package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ownNamespaces are the namespaces whose accounts and Secrets are Sprout's
// own, wherever it runs: the pod's, the Lease's when one is named, and the
// namespace of the ServiceAccount the API server says Sprout is (a
// SelfSubjectReview), which holds Sprout's own token even when it runs
// outside a pod with a kubeconfig. A binding generated there could hand
// Sprout's rights to whoever may mint a token for its account.
func ownNamespaces(ctx context.Context, cfg *rest.Config, leaseNamespace string, log *slog.Logger) []string {
	var out []string
	add := func(ns string) {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	add(inClusterNamespace())
	add(leaseNamespace)
	kube, err := kubernetes.NewForConfig(cfg)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, ownNamespaceTimeout)
		defer cancel()
		var review *authenticationv1.SelfSubjectReview
		review, err = kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil {
			add(serviceAccountNamespace(review.Status.UserInfo.Username))
		}
	}
	if err != nil {
		log.Warn("who Sprout is could not be asked: only the pod's and the Lease's namespaces are protected as Sprout's own", "reason", err.Error())
	}
	return out
}

// ownNamespaceTimeout bounds the question of who Sprout is, asked once the
// API server has answered.
const ownNamespaceTimeout = 30 * time.Second

// serviceAccountNamespace is the namespace of a ServiceAccount's user
// name, "" for another user.
func serviceAccountNamespace(user string) string {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return ""
	}
	ns, _, ok := strings.Cut(rest, ":")
	if !ok {
		return ""
	}
	return ns
}
