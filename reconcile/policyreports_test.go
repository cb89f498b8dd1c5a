package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sprout-gitops/sprout/deploy"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/policyreport"
	"github.com/sprout-gitops/sprout/reconcile"
)

// installReportCRDs installs the report CRDs Sprout ships until the test
// ends, or until the function it returns uninstalls them: the controllers
// of later tests find none, and write no reports.
func installReportCRDs(t *testing.T) (uninstall func()) {
	t.Helper()
	return installCRDsOf(t, deploy.ReportCRDs)
}

// installCRDsOf installs the CRDs read until the test ends, or until the
// function it returns uninstalls them and waits until they are gone.
func installCRDsOf(t *testing.T, read func() ([]*apiextensionsv1.CustomResourceDefinition, error)) (uninstall func()) {
	t.Helper()
	crds, err := read()
	if err != nil {
		t.Fatal(err)
	}
	opts := envtest.CRDInstallOptions{CRDs: crds}
	if _, err := envtest.InstallCRDs(cfg, opts); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	uninstall = func() {
		once.Do(func() {
			if err := envtest.UninstallCRDs(cfg, opts); err != nil {
				t.Errorf("uninstall the report CRDs: %v", err)
			}
			crdClient := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
			poll(t, "the report CRDs gone", func(ctx context.Context) (bool, error) {
				for _, crd := range crds {
					if _, err := crdClient.Get(ctx, crd.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return false, notFoundIsNil(err)
					}
				}
				return true, nil
			})
		})
	}
	t.Cleanup(uninstall)
	return uninstall
}

// reportPolicy is the policy name that generates "<trigger>-out" for
// ConfigMaps labelled app=reported whose value is not "quiet", from the
// integer in their value: a value that is not one fails the evaluation.
// Its auditAnnotation is a property of the results that pass.
func reportPolicy(name string) string {
	return fixtures.MustPolicyFile("reported", fixtures.Params{Name: name, App: "reported"})
}

// Each trigger gets one PolicyReport, as Kyverno 1.19 writes it for a
// GeneratingPolicy (pkg/utils/report, its reports controller): named by
// the trigger's UID, scoped to and owned by it, one result per policy:
// pass with the objects generated, error with the evaluation's error,
// none for a trigger the matchConditions skip. A report is updated in
// place only when its results change, and loses the results of a deleted
// policy.
func TestPolicyReportsAsKyvernoWritesThem(t *testing.T) {
	installReportCRDs(t)
	runController(t, nil)
	tb := newTable(t, "reported")
	// The policy generates for triggers created after it only.
	tb.applyPolicy(reportPolicy("reported"))
	for name, value := range map[string]string{"good": "1", "bad": "one", "quiet": "quiet"} {
		tb.trigger(name, "reported", value)
	}
	good, bad, quiet := tb.get("good"), tb.get("bad"), tb.get("quiet")

	goodReport := waitReport(t, tb.ns, good.UID, func(*unstructured.Unstructured) bool { return true })
	want := kyvernoReport(good, map[string]any{
		"source": "KyvernoGeneratingPolicy", "policy": "reported", "rule": "reported", "result": "pass",
		"message": "policy evaluated successfully", "scored": true, "category": "Multi-Tenancy", "severity": "medium",
		"properties": map[string]any{
			"process": "admission review", "owner": "team-good",
			"generated-resources": "/v1, Kind=ConfigMap Name=good-out Namespace=reported",
		},
	})
	checkReport(t, goodReport, want)

	badReport := waitReport(t, tb.ns, bad.UID, func(*unstructured.Unstructured) bool { return true })
	results, _, _ := unstructured.NestedSlice(badReport.Object, "results")
	if len(results) != 1 {
		t.Fatalf("bad's report holds %d results, want 1: %v", len(results), results)
	}
	msg, _ := results[0].(map[string]any)["message"].(string)
	if !strings.HasPrefix(msg, "failed to evaluate policy: ") {
		t.Errorf("bad's message %q: want Kyverno's \"failed to evaluate policy: <error>\"", msg)
	}
	results[0].(map[string]any)["message"] = "failed to evaluate policy: <error>"
	_ = unstructured.SetNestedSlice(badReport.Object, results, "results")
	checkReport(t, badReport, kyvernoReport(bad, map[string]any{
		"source": "KyvernoGeneratingPolicy", "policy": "reported", "rule": "reported", "result": "error",
		"message": "failed to evaluate policy: <error>", "scored": true, "category": "Multi-Tenancy", "severity": "medium",
		"properties": map[string]any{"process": "admission review"},
	}))
	if _, err := reportClient(tb.ns).Get(context.Background(), string(quiet.UID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a trigger the matchConditions skip has a report (%v): Kyverno reports nothing for it", err)
	}

	// A change that leaves the result as it was writes nothing; one that
	// changes it updates the report in place: the same object, written
	// once more (a custom resource's generation counts its writes).
	tb.edit("good", "value", "2")
	tb.waitFor("the new value generated", "good-out", func(cm *corev1.ConfigMap) bool { return cm != nil && cm.Data["n"] == "2" })
	tb.edit("good", "value", "two")
	updated := waitReport(t, tb.ns, good.UID, func(u *unstructured.Unstructured) bool {
		return firstResult(u)["result"] == "error"
	})
	if updated.GetUID() != goodReport.GetUID() || updated.GetGeneration() != 2 {
		t.Errorf("good's report: uid %s generation %d, want the same object (%s) written twice: at creation and when its result changed",
			updated.GetUID(), updated.GetGeneration(), goodReport.GetUID())
	}

	// A trigger the matchConditions now skip has no result: its report goes.
	tb.edit("good", "value", "quiet")
	waitNoReport(t, tb.ns, good.UID)

	// The policy deleted, its results go with it: bad's report too.
	tb.deletePolicy("reported")
	waitNoReport(t, tb.ns, bad.UID)
}

// A cluster-scoped trigger's report is a ClusterPolicyReport, owned by it.
func TestClusterScopedTriggersGetClusterPolicyReports(t *testing.T) {
	installReportCRDs(t)
	runController(t, nil)
	tb := newTable(t, "reported-cluster")
	// The policy generates for triggers created after it only.
	tb.applyPolicy(fixtures.MustPolicyFile("welcome", fixtures.Params{Name: "reported-cluster", Color: "reported-cluster"}))
	t.Cleanup(func() { tb.deletePolicy("reported-cluster") })
	createNamespace(t, "reported-cluster-trigger", map[string]string{"color": "reported-cluster"})
	ns, err := tb.kube.CoreV1().Namespaces().Get(context.Background(), "reported-cluster-trigger", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.APIVersion, ns.Kind = "v1", "Namespace"
	got := waitReport(t, "", ns.UID, func(*unstructured.Unstructured) bool { return true })
	checkReport(t, got, kyvernoReport(ns, map[string]any{
		"source": "KyvernoGeneratingPolicy", "policy": "reported-cluster", "rule": "reported-cluster", "result": "pass",
		"message": "policy evaluated successfully", "scored": true,
		"properties": map[string]any{"process": "admission review", "generated-resources": "/v1, Kind=ConfigMap Name=welcome Namespace=reported-cluster-trigger"},
	}))
}

// kyvernoReport is the report Kyverno's reports controller writes for
// trigger with one result, less the result's timestamp.
func kyvernoReport(trigger interface {
	metav1.Object
	GetObjectKind() schema.ObjectKind
}, result map[string]any) *unstructured.Unstructured {
	gvk := trigger.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		gvk = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"} // typed clients leave it out
	}
	ref := map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "name": trigger.GetName(), "uid": string(trigger.GetUID())}
	scope := map[string]any{"apiVersion": ref["apiVersion"], "kind": ref["kind"], "name": ref["name"], "uid": ref["uid"]}
	meta := map[string]any{
		"name": string(trigger.GetUID()), "labels": map[string]any{"app.kubernetes.io/managed-by": "sprout"},
		"ownerReferences": []any{ref},
	}
	kind := "ClusterPolicyReport"
	if ns := trigger.GetNamespace(); ns != "" {
		meta["namespace"], scope["namespace"], kind = ns, ns, "PolicyReport"
	}
	summary := map[string]any{"pass": int64(0), "fail": int64(0), "warn": int64(0), "error": int64(0), "skip": int64(0)}
	summary[result["result"].(string)] = int64(1)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": kind, "metadata": meta,
		"scope": scope, "results": []any{result}, "summary": summary,
	}}
}

// checkReport compares got with want, field by field, but for the server's
// metadata and the result's timestamp, which must be set.
func checkReport(t *testing.T, got, want *unstructured.Unstructured) {
	t.Helper()
	g := got.DeepCopy()
	meta := map[string]any{}
	for _, k := range []string{"name", "namespace", "labels", "ownerReferences"} {
		if v, ok := g.Object["metadata"].(map[string]any)[k]; ok {
			meta[k] = v
		}
	}
	g.Object["metadata"] = meta
	results, _, _ := unstructured.NestedSlice(g.Object, "results")
	for _, r := range results {
		ts, _ := r.(map[string]any)["timestamp"].(map[string]any)
		if s, _ := ts["seconds"].(int64); s <= 0 {
			t.Errorf("result without a timestamp: %v", r)
		}
		delete(r.(map[string]any), "timestamp")
	}
	_ = unstructured.SetNestedSlice(g.Object, results, "results")
	if diff := cmp.Diff(want.Object, g.Object); diff != "" {
		t.Errorf("report %s differs from Kyverno's (-want +got):\n%s", got.GetName(), diff)
	}
}

func firstResult(u *unstructured.Unstructured) map[string]any {
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	if len(results) == 0 {
		return nil
	}
	r, _ := results[0].(map[string]any)
	return r
}

// reportClient returns a client of the PolicyReports of namespace ns, or
// of the ClusterPolicyReports for "".
var reportClient = reportsOf(policyreport.PolicyReports, policyreport.ClusterPolicyReports)

// reportsOf makes a reportClient for the reports of namespaced and their
// cluster-scoped kind, cluster.
func reportsOf(namespaced, cluster schema.GroupVersionResource) func(ns string) dynamic.ResourceInterface {
	return func(ns string) dynamic.ResourceInterface {
		d := dynamic.NewForConfigOrDie(cfg)
		if ns == "" {
			return d.Resource(cluster)
		}
		return d.Resource(namespaced).Namespace(ns)
	}
}

// waitReport waits until the report of the trigger uid exists and cond
// holds for it.
func waitReport(t *testing.T, ns string, uid types.UID, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return waitReportIn(t, reportClient(ns), uid, cond)
}

// waitReportIn is waitReport through client.
func waitReportIn(t *testing.T, client dynamic.ResourceInterface, uid types.UID, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	poll(t, "the report of "+string(uid), func(ctx context.Context) (bool, error) {
		u, err := client.Get(ctx, string(uid), metav1.GetOptions{})
		if err != nil {
			return false, notFoundIsNil(err)
		}
		got = u
		return cond(u), nil
	})
	return got
}

func waitNoReport(t *testing.T, ns string, uid types.UID) {
	t.Helper()
	poll(t, "no report of "+string(uid), func(ctx context.Context) (bool, error) {
		_, err := reportClient(ns).Get(ctx, string(uid), metav1.GetOptions{})
		return apierrors.IsNotFound(err), notFoundIsNil(err)
	})
}

// A restarted controller reads the reports it wrote and writes none whose
// results did not change.
func TestARestartWritesNoUnchangedReport(t *testing.T) {
	installReportCRDs(t)
	restartWritesNoUnchangedReport(t, "reported-restart", reconcile.DefaultOptions(), reportClient)
}

// restartWritesNoUnchangedReport runs a controller with opts, then another:
// the report the first wrote for a trigger is not written again. A marker
// trigger created after the restart is written after what the first sync
// queued: once its report exists, a rewrite of the first would have been
// made. client is the reports' in a namespace.
func restartWritesNoUnchangedReport(t *testing.T, ns string, opts reconcile.Options, client func(ns string) dynamic.ResourceInterface) {
	t.Helper()
	_, stop := launchController(t, cfg, opts)
	tb := newTable(t, ns)
	tb.applyPolicy(reportPolicy(ns))
	t.Cleanup(func() { tb.deletePolicy(ns) })
	tb.trigger("first", "reported", "1")
	first := tb.get("first")
	anyReport := func(*unstructured.Unstructured) bool { return true }
	before := waitReportIn(t, client(tb.ns), first.UID, anyReport)
	// A result given again is stamped with a later second: a rewrite
	// would change the report.
	stamp, _, _ := unstructured.NestedInt64(firstResult(before), "timestamp", "seconds")
	poll(t, "a second after the result's timestamp", func(context.Context) (bool, error) { return time.Now().Unix() > stamp, nil })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	runController(t, func(o *reconcile.Options) { o.PolicyReports = opts.PolicyReports })
	tb.trigger("marker", "reported", "2")
	waitReportIn(t, client(tb.ns), tb.get("marker").UID, anyReport)
	after, err := client(tb.ns).Get(context.Background(), string(first.UID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the restarted controller rewrote an unchanged report: resourceVersion %s, then %s",
			before.GetResourceVersion(), after.GetResourceVersion())
	}
}

// A report write, and the read of the reports written before, wait for
// Options.Yield, which the controller holds while a sync is under way and
// until the first syncs end: nothing reaches the API server before it
// returns.
func TestReportWritesWaitForTheirYield(t *testing.T) {
	installReportCRDs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "yield-reports"
	createNamespace(t, ns, nil)
	cm, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yielding, release := make(chan struct{}, 1), make(chan struct{})
	var lists atomic.Int64
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "policyreports") && r.URL.Query().Has("labelSelector") {
				lists.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	w, err := policyreport.NewWriter(counted, policyreport.Options{Yield: func(ctx context.Context) {
		select {
		case yielding <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	policy := &metav1.ObjectMeta{Name: "yielding"}
	w.Set(policyreport.Trigger{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: cm.Name, UID: cm.UID},
		"yielding", policyreport.Pass(policy, nil, nil))
	select {
	case <-yielding:
	case <-time.After(time.Minute):
		t.Fatal("no write asked its yield in a minute")
	}
	if _, err := reportClient(ns).Get(ctx, string(cm.UID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the report was written before its yield returned (%v)", err)
	}
	if n := lists.Load(); n != 0 {
		t.Errorf("the reports written before were read %d times before the yield returned, want none: a start's lists go first", n)
	}
	close(release)
	waitReport(t, ns, cm.UID, func(*unstructured.Unstructured) bool { return true })
}

// A writer reads the reports written before while results are already
// handed to it: a result the report holds is not written again, a changed
// one is (also one unset, then set again), and a trigger a Retain drops or
// a deleted one loses its result
// (#44: the first syncs do not wait for the read). The test holds the read
// until every result is handed over.
func TestResultsSetWhileReportsLoadAreMerged(t *testing.T) {
	installReportCRDs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "load-merge-reports"
	createNamespace(t, ns, nil)
	var triggers []policyreport.Trigger
	for _, name := range []string{"same", "changed", "dropped", "deleted", "unset-then-set"} {
		cm, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Create(ctx,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		triggers = append(triggers, policyreport.Trigger{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name, UID: cm.UID})
	}
	pol := &metav1.ObjectMeta{Name: "merging"}
	run := func(w *policyreport.Writer) (stop func()) {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(ctx)
		}()
		return func() { cancel(); <-done }
	}
	first, err := policyreport.NewWriter(cfg, policyreport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(first)
	for _, tr := range triggers {
		first.Set(tr, "merging", policyreport.Pass(pol, nil, nil))
	}
	before := map[types.UID]string{}
	for _, tr := range triggers {
		before[tr.UID] = waitReport(t, ns, tr.UID, func(*unstructured.Unstructured) bool { return true }).GetResourceVersion()
	}
	stop()

	// The second writer's list of reports waits for release; its writes
	// are counted.
	release := make(chan struct{})
	var mu sync.Mutex
	var writes []string
	held := rest.CopyConfig(cfg)
	held.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "policyreports") {
				switch r.Method {
				case http.MethodGet:
					if r.URL.Query().Has("labelSelector") {
						select {
						case <-release:
						case <-r.Context().Done():
						}
					}
				default:
					mu.Lock()
					writes = append(writes, r.Method+" "+r.URL.Path)
					mu.Unlock()
				}
			}
			return rt.RoundTrip(r)
		})
	})
	second, err := policyreport.NewWriter(held, policyreport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer run(second)()
	second.Set(triggers[0], "merging", policyreport.Pass(pol, nil, nil))
	second.Set(triggers[1], "merging", policyreport.Error(pol, errors.New("changed")))
	second.Retain("merging", func(uid types.UID) bool { return uid != triggers[2].UID })
	second.Forget(triggers[3].UID)
	second.Unset(triggers[4].UID, "merging")
	second.Set(triggers[4], "merging", policyreport.Error(pol, errors.New("set again")))
	close(release)

	waitReport(t, ns, triggers[1].UID, func(u *unstructured.Unstructured) bool {
		results, _, _ := unstructured.NestedSlice(u.Object, "results")
		return len(results) == 1 && results[0].(map[string]any)["result"] == "error"
	})
	waitNoReport(t, ns, triggers[2].UID)
	waitNoReport(t, ns, triggers[3].UID)
	waitReport(t, ns, triggers[4].UID, func(u *unstructured.Unstructured) bool {
		results, _, _ := unstructured.NestedSlice(u.Object, "results")
		return len(results) == 1 && strings.HasSuffix(fmt.Sprint(results[0].(map[string]any)["message"]), "set again")
	})
	u, err := reportClient(ns).Get(ctx, string(triggers[0].UID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetResourceVersion() != before[triggers[0].UID] {
		t.Errorf("the report whose result did not change was written: resourceVersion %s, then %s", before[triggers[0].UID], u.GetResourceVersion())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writes) != 4 {
		t.Errorf("the writer made %d writes, want 4 (the two changed results, the dropped one, the deleted trigger's): %v", len(writes), writes)
	}
}
