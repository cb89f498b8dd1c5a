package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/globalctx"
	"github.com/sprout-gitops/sprout/reconcile"
)

// gctxKeySecret is where the stores of the tests are told the proof key is.
var gctxKeySecret = globalctx.KeySecret{Namespace: "gctx-key-home", Name: "sprout-proof-key"}

// runGlobalContext runs a store of GlobalContextEntries, writing their
// status and hiding gctxKeySecret, and a controller reading it, until the
// test ends.
func runGlobalContext(t *testing.T, web *celenv.HTTP, edits ...func(*reconcile.Options)) {
	t.Helper()
	api := discovery.NewDiscoveryClientForConfigOrDie(cfg).RESTClient()
	store := globalctx.New(globalctx.Options{Client: dynamic.NewForConfigOrDie(cfg), API: api, HTTP: web, WriteStatus: true,
		ProofKey: gctxKeySecret})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); store.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	runController(t, func(o *reconcile.Options) {
		o.HTTP, o.GlobalContext = web, store
		for _, edit := range edits {
			edit(o)
		}
	})
}

// applyEntry creates or replaces a GlobalContextEntry, deleted when the
// test ends.
func applyEntry(t *testing.T, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	entries := dynamic.NewForConfigOrDie(cfg).Resource(v2beta1.Resource)
	ctx := context.Background()
	old, err := entries.Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = entries.Create(ctx, u, metav1.CreateOptions{})
		t.Cleanup(func() { _ = entries.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	case err == nil:
		u.SetResourceVersion(old.GetResourceVersion())
		_, err = entries.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// entryStatus reads an entry's status.
func entryStatus(ctx context.Context, name string) (v2beta1.GlobalContextEntryStatus, error) {
	var st v2beta1.GlobalContextEntryStatus
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(v2beta1.Resource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return st, err
	}
	raw, _ := u.Object["status"].(map[string]any)
	return st, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st)
}

// gctxPolicy generates, for each ConfigMap labelled app: name in ns, a
// ConfigMap <trigger>-out whose data.value is expr.
func gctxPolicy(name, ns, expr string) string {
	return fixtures.MustPolicyFile("expression", fixtures.Params{Name: name, App: name, Source: ns, Expression: expr})
}

func hasValue(v string) func(*corev1.ConfigMap) bool {
	return func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["value"] == v }
}

// A kubernetesResource entry serves its objects, whole and projected, to a
// policy; a change of them updates what the policy generated, and the
// entry's status says it is ready.
func TestGlobalContextResourceEntry(t *testing.T) {
	runGlobalContext(t, nil)
	src := newTable(t, "gctx-teams")
	src.trigger("team-b", "team", "beta")
	src.trigger("team-a", "team", "alpha")
	applyEntry(t, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-teams
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: gctx-teams}
  projections:
  - name: values
    jmesPath: "[*].data.value"
`)
	tb := newTable(t, "gctx-res")
	tb.applyPolicy(gctxPolicy("gctx-res", "gctx-res",
		`globalContext.Get("gctx-teams", "values").join(",") + "/" + globalContext.Get("gctx-teams", "")[0].metadata.name`))
	t.Cleanup(func() { tb.deletePolicy("gctx-res") })
	tb.trigger("web", "gctx-res", "x")
	tb.waitFor("the entry's data, projected and whole", "web-out", hasValue("alpha,beta/team-a"))

	src.edit("team-a", "value", "gamma")
	tb.waitFor("the entry's new data", "web-out", hasValue("gamma,beta/team-a"))
	src.delete("team-a")
	tb.waitFor("the entry without the deleted object", "web-out", hasValue("beta/team-b"))

	poll(t, "the entry's Ready condition", func(ctx context.Context) (bool, error) {
		st, err := entryStatus(ctx, "gctx-teams")
		c := meta.FindStatusCondition(st.Conditions, v2beta1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v2beta1.ReasonSucceeded, err
	})
}

// A missing entry reads as null, as in Kyverno; once created, the
// policies that read it are synced again.
func TestGlobalContextMissingEntry(t *testing.T) {
	runGlobalContext(t, nil)
	tb := newTable(t, "gctx-missing")
	tb.applyPolicy(gctxPolicy("gctx-missing", "gctx-missing",
		`globalContext.Get("gctx-later", "") == null ? "none" : string(size(globalContext.Get("gctx-later", "")))`))
	t.Cleanup(func() { tb.deletePolicy("gctx-missing") })
	tb.trigger("web", "gctx-missing", "x")
	tb.waitFor("null for the missing entry", "web-out", hasValue("none"))

	applyEntry(t, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-later
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: gctx-missing}
`)
	tb.waitFor("the entry once created", "web-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["value"] != "none" })
}

// An apiCall entry polls an allowed host at its refresh interval; an entry
// whose host is not allowed fails the triggers that read it, naming the
// entry, and its status says why.
func TestGlobalContextAPICallEntry(t *testing.T) {
	var tier atomic.Value
	tier.Store("gold")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, fmt.Sprintf(`{"tier": %q}`, tier.Load()))
	}))
	t.Cleanup(srv.Close)
	web, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	runGlobalContext(t, web)
	applyEntry(t, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-tier
spec:
  apiCall:
    service: {url: "`+srv.URL+`/tier"}
    refreshInterval: 1s
  projections:
  - name: tier
    jmesPath: tier
`)
	tb := newTable(t, "gctx-call")
	tb.applyPolicy(gctxPolicy("gctx-call", "gctx-call", `globalContext.Get("gctx-tier", "tier")`))
	t.Cleanup(func() { tb.deletePolicy("gctx-call") })
	tb.trigger("web", "gctx-call", "x")
	tb.waitFor("the service's answer", "web-out", hasValue("gold"))
	tier.Store("silver")
	tb.waitFor("the answer after a refresh", "web-out", hasValue("silver"))
	poll(t, "the entry's lastRefreshTime", func(ctx context.Context) (bool, error) {
		st, err := entryStatus(ctx, "gctx-tier")
		return !st.LastRefreshTime.IsZero() && meta.IsStatusConditionTrue(st.Conditions, v2beta1.ConditionReady), err
	})

	refused := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	applyEntry(t, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-refused
spec:
  apiCall:
    service: {url: "`+refused+`/tier"}
    refreshInterval: 1s
`)
	tb.applyPolicy(gctxPolicy("gctx-refused", "gctx-call", `globalContext.Get("gctx-refused", "").tier`))
	t.Cleanup(func() { tb.deletePolicy("gctx-refused") })
	tb.trigger("api", "gctx-refused", "x")
	poll(t, "the refused entry's error on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "gctx-refused")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed && strings.Contains(c.Message, `globalContext.Get("gctx-refused")`) &&
			strings.Contains(c.Message, "is not allowed"), err
	})
	poll(t, "the refused entry's status", func(ctx context.Context) (bool, error) {
		st, err := entryStatus(ctx, "gctx-refused")
		c := meta.FindStatusCondition(st.Conditions, v2beta1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v2beta1.ReasonFailed && strings.Contains(c.Message, "is not allowed"), err
	})
	if tb.get("api-out") != nil {
		t.Error("a trigger whose entry failed generated an object")
	}
}

// An entry Sprout refuses (here a call to the API server that is no read
// of a resource) says why on its status, naming the field, and fails the
// triggers that read it.
func TestGlobalContextInvalidEntry(t *testing.T) {
	runGlobalContext(t, nil)
	applyEntry(t, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-urlpath
spec:
  apiCall:
    urlPath: /version
    refreshInterval: 1m
`)
	poll(t, "the invalid entry's status", func(ctx context.Context) (bool, error) {
		st, err := entryStatus(ctx, "gctx-urlpath")
		c := meta.FindStatusCondition(st.Conditions, v2beta1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "spec.apiCall.urlPath"), err
	})
	tb := newTable(t, "gctx-invalid")
	tb.applyPolicy(gctxPolicy("gctx-invalid", "gctx-invalid", `string(size(globalContext.Get("gctx-urlpath", "")))`))
	t.Cleanup(func() { tb.deletePolicy("gctx-invalid") })
	tb.trigger("web", "gctx-invalid", "x")
	poll(t, "the invalid entry's error on the policy", func(ctx context.Context) (bool, error) {
		c, err := policyCondition(ctx, "gctx-invalid")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed && strings.Contains(c.Message, `globalContext.Get("gctx-urlpath")`) &&
			strings.Contains(c.Message, "spec.apiCall.urlPath"), err
	})
}

// An entry that only an incremental sync read (a new trigger's evaluation
// reads it, the triggers before read none) is a dependency of the policy
// as one a full sync read is: a change of it updates what was generated.
// Only the full sync used to record the entries read.
func TestGlobalContextEntryReadIncrementally(t *testing.T) {
	runGlobalContext(t, nil)
	src := newTable(t, "gctx-incr-src")
	src.trigger("team-a", "team", "alpha")
	applyEntry(t, `apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
metadata:
  name: gctx-incr
spec:
  kubernetesResource: {version: v1, resource: configmaps, namespace: gctx-incr-src}
  projections:
  - name: values
    jmesPath: "[*].data.value"
`)
	tb := newTable(t, "gctx-incr")
	tb.applyPolicy(gctxPolicy("gctx-incr", "gctx-incr",
		`object.data.?value.orValue("") == "read" ? globalContext.Get("gctx-incr", "values").join(",") : "none"`))
	t.Cleanup(func() { tb.deletePolicy("gctx-incr") })
	tb.trigger("first", "gctx-incr", "skip")
	tb.waitFor("the first trigger's object, reading no entry", "first-out", hasValue("none"))
	tb.trigger("second", "gctx-incr", "read")
	tb.waitFor("the second trigger's object, reading the entry", "second-out", hasValue("alpha"))

	src.edit("team-a", "value", "gamma")
	tb.waitFor("the entry's new data", "second-out", hasValue("gamma"))
}
