//go:build demo

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// demoOn runs `sprout demo --existing-cluster --once` on the cluster of
// kubeconfig with args and returns what it printed.
func demoOn(kubeconfig string, args ...string) (string, error) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetArgs(append([]string{"demo", "--existing-cluster", "--once", "--kubeconfig", kubeconfig}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestDemoOnExistingCluster: with --existing-cluster the demo starts no
// control plane, installs the CRDs the cluster lacks, shows the expected
// objects and deletes the triggers it applied; a cluster that holds one of
// its triggers already is refused, and that trigger is left alone.
func TestDemoOnExistingCluster(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	kubeconfig := writeKubeconfig(t, cp)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	// A cluster without Sprout's records.
	crds := dynamic.NewForConfigOrDie(cp.Config).Resource(crdsResource)
	if err := crds.Delete(ctx, "policyinventories.sprout.dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CRD of records gone", func(ctx context.Context) bool {
		_, err := crds.Get(ctx, "policyinventories.sprout.dev", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	out, err := demoOn(kubeconfig)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"(no local control plane)", "installed CRD policyinventories.sprout.dev",
		"all expected objects exist", "deleted the demo's triggers and policy"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "starting a local control plane") {
		t.Errorf("the demo started a control plane:\n%s", out)
	}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, "payments", metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Error("the demo left its Namespace payments in place")
	}

	red := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-red"}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, red, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = demoOn(kubeconfig, "--scenario", "zk-kafka-address")
	if err == nil || !strings.Contains(err.Error(), "Namespace team-red exists already") {
		t.Errorf("the demo on a cluster with its trigger: %v\n%s", err, out)
	}
	if ns, err := kube.CoreV1().Namespaces().Get(ctx, "team-red", metav1.GetOptions{}); err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("the refused demo touched the cluster's Namespace team-red: %v", err)
	}
}
