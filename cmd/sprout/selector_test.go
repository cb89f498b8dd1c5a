package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
)

// TestRunPolicySelector: with --policy-selector, sprout run runs only the
// policies whose labels match: the other one, left to Kyverno, generates
// nothing, until it is labelled in.
func TestRunPolicySelector(t *testing.T) {
	t.Parallel()
	cp := startRun(t, "--policy-selector", "sprout.dev/run=true")
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	client := dynamic.NewForConfigOrDie(cp.Config).Resource(apiv1.GeneratingPolicies)
	ctx := context.Background()
	for name, labels := range map[string]string{"selected": "{sprout.dev/run: \"true\"}", "kyvernos": "{}"} {
		doc := strings.Replace(string(policy), "name: zk-kafka-address\n", "name: "+name+"\n  labels: "+labels+"\n", 1)
		doc = strings.Replace(doc, `"name": "zk-kafka-address"`, `"name": "`+name+`"`, 1)
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sel-red", Labels: map[string]string{"color": "red"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exists := func(ctx context.Context, name string) bool {
		_, err := kube.CoreV1().ConfigMaps("sel-red").Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Log(err)
		}
		return err == nil
	}
	eventually(t, "the selected policy's ConfigMap", func(ctx context.Context) bool { return exists(ctx, "selected") })
	// The selected policy has synced the Namespace: the other one would
	// have by now, had Sprout run it.
	if exists(ctx, "kyvernos") {
		t.Fatal("the unselected policy generated its ConfigMap")
	}
	if _, err := client.Patch(ctx, "kyvernos", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"sprout.dev/run":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy labelled in to generate", func(ctx context.Context) bool { return exists(ctx, "kyvernos") })
}

func TestPolicySelectorFlag(t *testing.T) {
	ro := &sourceFlags{clusterPolicies: true, policySelector: "sprout.dev/run in (true"}
	if _, err := ro.sources(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), `--policy-selector "sprout.dev/run in (true"`) {
		t.Fatalf("a bad selector: %v", err)
	}
}
