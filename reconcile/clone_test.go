package reconcile_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestCloneFollowsItsSource: resource.Get reads through the controller's
// caches, the clone carries its source's UID, and a change to the source
// re-queues the policy, which brings the clone up to date.
func TestCloneFollowsItsSource(t *testing.T) {
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createNamespace(t, "clone-src", nil)
	src, err := kube.CoreV1().Secrets("clone-src").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred"},
		Data:       map[string][]byte{"token": []byte("v1")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startController(t)
	applyFixture(t, "clone-get", "policy.yaml", func(u *unstructured.Unstructured) {
		vars, _, _ := unstructured.NestedSlice(u.Object, "spec", "variables")
		vars[1].(map[string]any)["expression"] = `resource.Get("v1", "secrets", "clone-src", "regcred")`
		_ = unstructured.SetNestedSlice(u.Object, vars, "spec", "variables")
	})
	createNamespace(t, "clone-dst", nil)

	var clone *corev1.Secret
	poll(t, "the clone", func(ctx context.Context) (bool, error) {
		clone, err = kube.CoreV1().Secrets("clone-dst").Get(ctx, "regcred", metav1.GetOptions{})
		return err == nil, nil
	})
	if string(clone.Data["token"]) != "v1" {
		t.Errorf("clone token = %q", clone.Data["token"])
	}
	if got := clone.Labels[sproutv1alpha1.LabelSourceUID]; got != string(src.UID) {
		t.Errorf("source-uid label = %q, want %q", got, src.UID)
	}

	src.Data["token"] = []byte("v2")
	if _, err := kube.CoreV1().Secrets("clone-src").Update(ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the clone to follow its source", func(ctx context.Context) (bool, error) {
		clone, err := kube.CoreV1().Secrets("clone-dst").Get(ctx, "regcred", metav1.GetOptions{})
		return err == nil && string(clone.Data["token"]) == "v2", err
	})
}

// TestForeignObjectIsNeverOverwritten: an object with the downstream's name
// that Sprout does not own stays as it is, and the policy says why.
func TestForeignObjectIsNeverOverwritten(t *testing.T) {
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	createNamespace(t, "foreign-red", map[string]string{"color": "foreign"})
	if _, err := kube.CoreV1().ConfigMaps("foreign-red").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "zk-kafka-address"},
		Data:       map[string]string{"ZK_ADDRESS": "mine"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t)
	applyColorPolicy(t, "zk-kafka-foreign", "foreign", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, true, "spec", "evaluation", "generateExisting", "enabled")
	})
	poll(t, "the policy to report the foreign object", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "zk-kafka-foreign")
		return c != nil && c.Reason == reconcile.ReasonNotOwned &&
			strings.Contains(c.Message, "ConfigMap/foreign-red/zk-kafka-address (exists and is not managed by Sprout)"), err
	})
	cm, err := kube.CoreV1().ConfigMaps("foreign-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["ZK_ADDRESS"] != "mine" || cm.Labels[sproutv1alpha1.LabelManagedBy] != "" {
		t.Errorf("the foreign ConfigMap was changed: data %v, labels %v", cm.Data, cm.Labels)
	}
}
