package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestAClonePolicyWhoseSourceNamespaceIsATargetSettles: a policy that
// clones the Secrets of a namespace into every trigger's namespace, with a
// trigger in the source namespace itself, would clone each source onto
// itself. That clone is the source: there is nothing to write, the policy
// reaches a steady state and reports Ready, and the sources stay as they
// were, as in Kyverno.
func TestAClonePolicyWhoseSourceNamespaceIsATargetSettles(t *testing.T) {
	startController(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createNamespace(t, "self-src", nil)
	createNamespace(t, "self-dst", nil)
	for _, name := range []string{"a", "main"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "self-src", Labels: map[string]string{"clone": "self"}},
			Data: map[string][]byte{"v": []byte(name)}}
		if _, err := kube.CoreV1().Secrets("self-src").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tb := &table{t: t, ns: "self-src", kube: kube}
	tb.applyPolicy(clonePolicy("self-read", "self", "self-src", true))
	t.Cleanup(func() { tb.deletePolicy("self-read") })
	tb.trigger("in-source", "self", "x")
	(&table{t: t, ns: "self-dst", kube: kube}).trigger("in-target", "self", "y")

	poll(t, "the clones in the other namespace", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"a", "main"} {
			if _, err := kube.CoreV1().Secrets("self-dst").Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, notFoundIsNil(err)
			}
		}
		return true, nil
	})
	var last *metav1.Condition
	poll(t, "the policy Ready", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "self-read")
		last = c
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reconcile.ReasonReconciled, err
	})
	t.Logf("Ready: %s", last.Message)
	for _, name := range []string{"a", "main"} {
		s, err := kube.CoreV1().Secrets("self-src").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Labels[sproutv1alpha1.LabelManagedBy] != "" {
			t.Errorf("the source %s was written as its own clone: %v", name, s.Labels)
		}
	}
}
