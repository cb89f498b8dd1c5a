package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/blast"
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// TestApproveReleasesHeldRevision: under --blast-radius 0 a revision that
// overwrites a generated object is held; `sprout diff` shows it held and
// why; `sprout approve --revision` refuses another revision than the
// policy's, and `sprout approve` writes the held overwrite and prints the
// sync.
func TestApproveReleasesHeldRevision(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	kubeconfig := writeKubeconfig(t, cp)
	runSprout(t, kubeconfig, "--blast-radius", "0")
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	kafka := func(ctx context.Context) string {
		cm, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return cm.Data["KAFKA_ADDRESS"]
	}
	eventually(t, "the first revision's object", func(ctx context.Context) bool { return strings.HasPrefix(kafka(ctx), "192.168.10.13") })

	objs, err := fixtures.Objects("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vars, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "variables")
	v := vars[1].(map[string]any)
	v["expression"] = strings.Replace(v["expression"].(string), "192.168.10.13", "10.0.0.13", 1)
	_ = unstructured.SetNestedSlice(objs[0].Object, vars, "spec", "variables")
	applyObjects(t, cp.Config, objs[0])
	policies := dynamic.NewForConfigOrDie(cp.Config).Resource(apiv1.GeneratingPolicies)
	var held string
	eventually(t, "the revision held", func(ctx context.Context) bool {
		u, err := policies.Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		if err != nil {
			return false
		}
		p, err := apiv1.FromUnstructured(u)
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(p.PolicyStatus().ConditionStatus.Conditions, reconcile.ConditionReady)
		if c == nil || c.Reason != report.ReasonBlastRadiusExceeded {
			return false
		}
		held = blast.Revision(p)
		return strings.Contains(c.Message, "revision "+held+" would delete 0 and overwrite 1 of the policy's 1 objects")
	})
	if got := kafka(context.Background()); !strings.HasPrefix(got, "192.168.10.13") {
		t.Fatalf("the held overwrite was written: %s", got)
	}

	out, err := dayTwoCmd(kubeconfig, "diff", "--blast-radius", "0")
	if !errors.Is(err, errDifferences) || !strings.Contains(out, "# held GeneratingPolicy/zk-kafka-address: revision "+held) ||
		!strings.Contains(out, "GeneratingPolicy/zk-kafka-address: held by the blast-radius guard: revision "+held) ||
		!strings.Contains(out, "+  KAFKA_ADDRESS: 10.0.0.13") {
		t.Errorf("sprout diff: %v\n%s", err, out)
	}

	if out, err := dayTwoCmd(kubeconfig, "approve", "zk-kafka-address", "--revision", "0123456789abcdef"); err == nil ||
		!strings.Contains(err.Error(), "GeneratingPolicy/zk-kafka-address is at revision "+held+" now") {
		t.Errorf("sprout approve of another revision: %v\n%s", err, out)
	}
	out, err = dayTwoCmd(kubeconfig, "approve", "zk-kafka-address", "--revision", held)
	if err != nil {
		t.Fatalf("sprout approve: %v\n%s", err, out)
	}
	for _, want := range []string{"GeneratingPolicy/zk-kafka-address: revision " + held + " approved", "synced: Ready True, Reconciled"} {
		if !strings.Contains(out, want) {
			t.Errorf("sprout approve printed no %q:\n%s", want, out)
		}
	}
	if got := kafka(context.Background()); !strings.HasPrefix(got, "10.0.0.13") {
		t.Errorf("approved, the overwrite was not written: %s", got)
	}
}
