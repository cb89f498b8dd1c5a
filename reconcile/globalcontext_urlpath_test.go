package reconcile_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

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
