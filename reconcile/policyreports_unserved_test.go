package reconcile_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/policyreport"
)

// A report written while the API server does not serve the report CRD, as
// while it is installed again (or while discovery is briefly unavailable),
// gets the API server's bare NotFound. That is no sign of a gone
// namespace: the write is tried again and lands once the CRD is served.
// The writer read the reports while the CRD was served, so it is on.
func TestAReportWrittenBeforeItsCRDIsServedIsWrittenAgain(t *testing.T) {
	tb := newTable(t, "reports-unserved")
	tb.trigger("early", "reported", "1")
	early := tb.get("early")

	// loaded is closed when the writer has read the reports written
	// before; refused, when the API server answered a report create with
	// NotFound: the CRD is installed again only after that.
	uninstall := installReportCRDs(t)
	loaded, refused := make(chan struct{}), make(chan struct{})
	var onceLoaded, onceRefused sync.Once
	own := rest.CopyConfig(cfg)
	own.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			switch {
			case err != nil:
			case req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/clusterpolicyreports") && resp.StatusCode == http.StatusOK:
				onceLoaded.Do(func() { close(loaded) }) // the last list of the read
			case req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/policyreports") && resp.StatusCode == http.StatusNotFound:
				onceRefused.Do(func() { close(refused) })
			}
			return resp, err
		})
	})
	w, err := policyreport.NewWriter(own, policyreport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-loaded:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer did not read the reports in 30 s")
	}
	uninstall()

	w.Set(policyreport.Trigger{APIVersion: "v1", Kind: "ConfigMap", Namespace: tb.ns, Name: "early", UID: early.UID}, "early-policy", &policyreport.Result{Policy: "early-policy", Rule: "early-policy", Result: policyreport.StatusPass})
	select {
	case <-refused:
	case <-time.After(30 * time.Second):
		t.Fatal("no report create was refused without the CRD")
	}
	installReportCRDs(t)
	got := waitReport(t, tb.ns, early.UID, func(*unstructured.Unstructured) bool { return true })
	results, _, _ := unstructured.NestedSlice(got.Object, "results")
	if len(results) != 1 || results[0].(map[string]any)["policy"] != "early-policy" {
		t.Errorf("the report holds %v, want early-policy's pass", results)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
