package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
