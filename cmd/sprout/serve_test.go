package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	clientmetrics "k8s.io/client-go/tools/metrics"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestProfilesOnlyOnThePprofHandler(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.Handler
		want    int
	}{
		{"pprof", pprofHandler(), http.StatusOK},
		{"metrics", metricsHandler(newRegistry()), http.StatusNotFound},
		{"probes", probesHandler(func() string { return "" }), http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil))
			if rec.Code != tc.want {
				t.Errorf("GET /debug/pprof/heap: %d, want %d", rec.Code, tc.want)
			}
		})
	}
}

// TestMetricsUncompressed: /metrics answers a scraper that accepts gzip
// (Prometheus, Go's HTTP client) uncompressed, so that no compressor is
// kept for it.
func TestMetricsUncompressed(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	metricsHandler(newRegistry()).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	if enc := rec.Header().Get("Content-Encoding"); enc != "" {
		t.Errorf("GET /metrics with Accept-Encoding gzip: Content-Encoding %q, want none", enc)
	}
	if !strings.Contains(rec.Body.String(), "go_goroutines") {
		t.Errorf("GET /metrics: no go_goroutines series in\n%.300s", rec.Body.String())
	}
}

// TestRequestsAreNotCountedForNobody: controller-runtime's init makes
// client-go count every request in a registry `sprout run` does not serve;
// newRegistry turns that count off.
func TestRequestsAreNotCountedForNobody(t *testing.T) {
	newRegistry()
	// A host no other test's requests name: they may have been counted
	// before newRegistry ran.
	const host = "counted-for-nobody.invalid"
	clientmetrics.RequestResult.Increment(context.Background(), "200", http.MethodGet, host)
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == host {
					t.Fatalf("%s counted a request to %s", f.GetName(), host)
				}
			}
		}
	}
}
