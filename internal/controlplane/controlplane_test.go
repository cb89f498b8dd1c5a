package controlplane_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

var cfg *rest.Config

func TestMain(m *testing.M) { controlplane.Main(m, &cfg) }

func TestCRDsServeEveryVersion(t *testing.T) {
	client := dynamic.NewForConfigOrDie(cfg)
	for _, v := range apiv1.ServedVersions {
		gvr := apiv1.GeneratingPolicies.GroupVersion().WithResource("generatingpolicies")
		gvr.Version = v
		if _, err := client.Resource(gvr).List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Errorf("list %s: %v", gvr, err)
		}
	}
}

// TestAPIServerRestarts: the API server stops at once, open watches
// notwithstanding, and refuses connections; started again it answers the
// same Config at the same address with what etcd kept.
func TestAPIServerRestarts(t *testing.T) {
	cp, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}, Data: map[string]string{"a": "b"}}
	if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := kube.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err) // envtest waits 20 s, then kills it and says so
	}
	_, err = kube.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	if !utilnet.IsConnectionRefused(err) {
		t.Fatalf("a request to the stopped API server: %v, want connection refused", err)
	}

	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	got, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil || got.Data["a"] != "b" {
		t.Fatalf("after the restart, with the same Config: %v %v", got, err)
	}
}
