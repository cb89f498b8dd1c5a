package reconcile_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
)

// An apiCall entry with a urlPath reads the API server, as Kyverno's does:
// its data is the API server's JSON answer (here a ConfigMapList), read
// again at its refresh interval, and a change of it updates what the
// policy generated.
func TestGlobalContextURLPathEntry(t *testing.T) {
	runGlobalContext(t, nil)
	src := newTable(t, "gctx-path-src")
	src.trigger("alpha", "team", "a")
	applyEntry(t, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-path
spec:
  apiCall:
    urlPath: /api/v1/namespaces/gctx-path-src/configmaps
    refreshInterval: 1s
  projections:
  - name: names
    jmesPath: "items[?metadata.labels.app == 'team'].metadata.name"
`)
	tb := newTable(t, "gctx-path")
	tb.applyPolicy(gctxPolicy("gctx-path", "gctx-path",
		`globalContext.Get("gctx-path", "").kind + ":" + globalContext.Get("gctx-path", "names").join(",")`))
	t.Cleanup(func() { tb.deletePolicy("gctx-path") })
	tb.trigger("reader", "gctx-path", "x")
	tb.waitFor("the API server's answer", "reader-out", hasValue("ConfigMapList:alpha"))
	src.trigger("beta", "team", "b")
	tb.waitFor("the answer after a refresh", "reader-out", hasValue("ConfigMapList:alpha,beta"))
	poll(t, "the entry's status", func(ctx context.Context) (bool, error) {
		st, err := entryStatus(ctx, "gctx-path")
		return meta.IsStatusConditionTrue(st.Conditions, v2beta1.ConditionReady), err
	})
}

// A policy reading an entry that lists the Secrets of Sprout's namespace
// gets all of them but the proof key's, which the entry read with Sprout's
// rights.
func TestGlobalContextURLPathHidesTheProofKey(t *testing.T) {
	runGlobalContext(t, nil)
	home := newTable(t, gctxKeySecret.Namespace)
	for _, name := range []string{gctxKeySecret.Name, "other"} {
		if _, err := home.kube.CoreV1().Secrets(home.ns).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"key": []byte("not to be read")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	applyEntry(t, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-key-list
spec:
  apiCall:
    urlPath: /api/v1/namespaces/gctx-key-home/secrets
  projections:
  - name: names
    jmesPath: "items[].metadata.name"
`)
	tb := newTable(t, "gctx-key-list")
	tb.applyPolicy(gctxPolicy("gctx-key-list", "gctx-key-list", `globalContext.Get("gctx-key-list", "names").join(",")`))
	t.Cleanup(func() { tb.deletePolicy("gctx-key-list") })
	tb.trigger("reader", "gctx-key-list", "x")
	tb.waitFor("the Secrets but the key", "reader-out", hasValue("other"))
}
