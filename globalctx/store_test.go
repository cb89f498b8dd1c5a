package globalctx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
	"github.com/sprout-gitops/sprout/globalctx"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

var cfg *rest.Config

func TestMain(m *testing.M) { controlplane.Main(m, &cfg) }

func configMapEntry(name, namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v2beta1.GroupVersion.String(), "kind": v2beta1.Kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"kubernetesResource": map[string]any{"version": "v1", "resource": "configmaps", "namespace": namespace}},
	}}
}

// The store serves at most MaxEntries entries; one past it fails its reads
// saying why, and is loaded once another entry is deleted.
func TestStoreServesAtMostMaxEntries(t *testing.T) {
	ctx := context.Background()
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bounded"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	store := globalctx.New(globalctx.Options{Client: dyn, MaxEntries: 1})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); store.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	entries := dyn.Resource(v2beta1.Resource)
	for _, name := range []string{"first", "second"} {
		if _, err := entries.Create(ctx, configMapEntry(name, "bounded"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Created in order, so that the first one takes the only place.
		poll(t, name+" seen", func(ctx context.Context) (bool, error) {
			_, found, _ := store.Get(ctx, name, "")
			return found, nil
		})
	}
	if _, _, err := store.Get(ctx, "first", ""); err != nil {
		t.Fatalf("the first entry: %v", err)
	}
	if _, _, err := store.Get(ctx, "second", ""); err == nil || !strings.Contains(err.Error(), "Sprout serves at most 1 entries") {
		t.Fatalf("the entry past the bound: want its error, got %v", err)
	}
	if err := entries.Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the waiting entry loaded", func(ctx context.Context) (bool, error) {
		v, _, err := store.Get(ctx, "second", "")
		return err == nil && v != nil, nil
	})
	_ = entries.Delete(ctx, "second", metav1.DeleteOptions{})
}

func poll(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
