package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/fixtures"
)

// TestCloneOrDataFollowsKyvernosRule: as in Kyverno's generator library, an
// object handed to generator.Apply is a clone (labelled with its source's
// UID, kept when its policy is deleted) when it carries a resourceVersion,
// that is when it was read from the cluster; anything else is data, deleted
// with its policy, whatever fields it copied from a resource.Get result.
func TestCloneOrDataFollowsKyvernosRule(t *testing.T) {
	startController(t)
	ctx := context.Background()
	createNamespace(t, "cod-src", nil)
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "src", Namespace: "cod-src"}, Data: map[string]string{"v": "1"}}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("cod-src").Create(ctx, src, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb := newTable(t, "cod")
	tb.applyPolicy(fixtures.MustPolicyFile("clone-or-data", fixtures.Params{Name: "clone-or-data", App: "cod", Source: "cod-src"}))
	tb.trigger("t", "cod", "x")
	want := map[string]bool{"t-fields": false, "t-rv": true, "t-uid": false, "t-setfield": true}
	for name, clone := range want {
		cm := tb.waitFor("the downstream "+name, name, exists)
		if _, labelled := cm.Labels["generate.kyverno.io/source-uid"]; labelled != clone {
			t.Errorf("%s: source-uid label present = %t, want %t: %v", name, labelled, clone, cm.Labels)
		}
	}
	tb.deletePolicy("clone-or-data")
	tb.settleWith(derivedPolicy("cod-marker", "cod", "marker", "one", true, false), "t-marker")
	t.Cleanup(func() { tb.deletePolicy("cod-marker") })
	for name, clone := range want {
		if clone {
			if tb.get(name) == nil {
				t.Errorf("%s, a clone, was deleted with its policy", name)
			}
			continue
		}
		tb.waitFor("the data downstream "+name+" to go with its policy", name, absent)
	}
}
