package reconcile_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/reconcile"
)

// A policy's http.Get reaches an allowed host, and one sync asks it once
// however many triggers ask the same: the triggers exist first, and the
// policy's first sync generates for all of them (generateExisting).
func TestPoliciesCallAllowedHostsOncePerSync(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, `{"tier": "gold"}`)
	}))
	t.Cleanup(srv.Close)
	web, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	runController(t, func(o *reconcile.Options) { o.HTTP = web })
	tb := newTable(t, "http-calls")
	const triggers = 5
	for i := range triggers {
		tb.trigger(fmt.Sprintf("web-%d", i), "web", "x")
	}
	tb.applyPolicy(fixtures.MustPolicyFile("http-get", fixtures.Params{Name: "http-calls", App: "web", Source: "http-calls", URL: srv.URL, GenerateExisting: true}))
	t.Cleanup(func() { tb.deletePolicy("http-calls") })
	for i := range triggers {
		tb.waitFor("the tier from the service", fmt.Sprintf("web-%d-tier", i), func(cm *corev1.ConfigMap) bool {
			return cm != nil && cm.Data["tier"] == "gold"
		})
	}
	if n := hits.Load(); n >= triggers {
		t.Errorf("%d triggers asked the same URL and it was called %d times: not once per sync", triggers, n)
	}
}
