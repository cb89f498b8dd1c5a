package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// dayTwoCmd runs `sprout VERB POLICY` in-process against kubeconfig and
// returns what it printed.
func dayTwoCmd(kubeconfig string, args ...string) (string, error) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetArgs(append(args, "--kubeconfig", kubeconfig))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestReconcileSuspendResume: `sprout reconcile` syncs a policy and prints
// its state; `sprout suspend` stops it, and a Namespace created meanwhile
// gets nothing; `sprout reconcile` refuses a suspended policy; `sprout
// resume` syncs it and prints what it generated.
func TestReconcileSuspendResume(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	kubeconfig := writeKubeconfig(t, cp)
	runSprout(t, kubeconfig)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	applyScenario(t, cp, "zk-kafka-address", "policy.yaml", "triggers.yaml")
	generated := func(ns string) bool {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil
	}
	eventually(t, "the first sync's record and Event", func(ctx context.Context) bool {
		p := &policyClient{ref: sproutv1alpha1.PolicyReference{Kind: apiv1.GeneratingPolicyKind, Name: "zk-kafka-address"},
			records: dynamic.NewForConfigOrDie(cp.Config).Resource(sproutv1alpha1.PolicyInventories), kube: kube}
		rec, err := p.record(ctx)
		events, _ := p.changeEvents(ctx)
		return err == nil && rec != nil && rec.Status.Objects == 1 && len(events) == 1
	})

	out, err := dayTwoCmd(kubeconfig, "reconcile", "gpol/zk-kafka-address")
	if err != nil {
		t.Fatalf("sprout reconcile: %v\n%s", err, out)
	}
	for _, want := range []string{"GeneratingPolicy/zk-kafka-address: sync requested (reconcile.fluxcd.io/requestedAt=",
		"GeneratingPolicy/zk-kafka-address: synced: Ready True, Reconciled: 1 trigger, 1 object", "triggers 1 -> 1, objects 1 -> 1", "nothing generated or pruned"} {
		if !strings.Contains(out, want) {
			t.Errorf("sprout reconcile printed no %q:\n%s", want, out)
		}
	}

	if out, err := dayTwoCmd(kubeconfig, "suspend", "zk-kafka-address"); err != nil || out != "zk-kafka-address suspended\n" {
		t.Fatalf("sprout suspend: %v\n%s", err, out)
	}
	eventually(t, "the policy Suspended", func(ctx context.Context) bool {
		u, err := dynamic.NewForConfigOrDie(cp.Config).Resource(apiv1.GeneratingPolicies).Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		if err != nil {
			return false
		}
		p, err := apiv1.FromUnstructured(u)
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(p.PolicyStatus().ConditionStatus.Conditions, reconcile.ConditionReady)
		return c != nil && c.Reason == reconcile.ReasonSuspended
	})
	green := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-green", Labels: map[string]string{"color": "red"}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, green, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := dayTwoCmd(kubeconfig, "reconcile", "zk-kafka-address"); err == nil || !strings.Contains(err.Error(), "GeneratingPolicy/zk-kafka-address is suspended: `sprout resume` it") {
		t.Errorf("sprout reconcile of a suspended policy: %v\n%s", err, out)
	}
	if generated("team-green") {
		t.Error("a suspended policy generated for a new trigger")
	}

	out, err = dayTwoCmd(kubeconfig, "resume", "zk-kafka-address")
	if err != nil {
		t.Fatalf("sprout resume: %v\n%s", err, out)
	}
	if !generated("team-green") {
		t.Errorf("resumed, the policy did not catch up:\n%s", out)
	}
	for _, want := range []string{"synced: Ready True, Reconciled: 2 triggers, 2 objects", "triggers 1 -> 2, objects 1 -> 2",
		"Generated: created 1: ConfigMap/team-green/zk-kafka-address"} {
		if !strings.Contains(out, want) {
			t.Errorf("sprout resume printed no %q:\n%s", want, out)
		}
	}
}
