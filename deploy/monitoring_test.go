package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/reconcile"
)

// installServiceMonitorCRD installs testdata's cut-down ServiceMonitor CRD
// and waits until ServiceMonitors can be applied.
func installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile("testdata/servicemonitors.monitoring.coreos.com.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd, err := manifest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	applyForReal(t, crd...)
	probe := &unstructured.Unstructured{}
	probe.SetAPIVersion("monitoring.coreos.com/v1")
	probe.SetKind("ServiceMonitor")
	probe.SetNamespace(namespace)
	a := newApplier(t)
	poll(t, "ServiceMonitors served", func(ctx context.Context) (bool, error) {
		r, err := a.Resource(probe)
		if meta.IsNoMatchError(err) {
			return false, nil // discovery does not list it yet
		}
		if err != nil {
			return false, err
		}
		_, err = r.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// registeredMetrics returns the names of the series a Controller registers.
func registeredMetrics(t *testing.T) []string {
	t.Helper()
	reg := &describingRegisterer{Registerer: prometheus.NewRegistry()}
	opts := reconcile.DefaultOptions()
	opts.Metrics = reg
	if _, err := reconcile.New(cfg, opts); err != nil {
		t.Fatal(err)
	}
	if len(reg.names) == 0 {
		t.Fatal("a Controller registers no metric")
	}
	return reg.names
}

// descName finds a metric's name in its Desc's String: client_golang
// exports no other way to read it.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describingRegisterer notes the name of every series registered on it.
type describingRegisterer struct {
	prometheus.Registerer
	names []string
}

func (d *describingRegisterer) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() {
		c.Describe(descs)
		close(descs)
	}()
	for desc := range descs {
		if m := descName.FindStringSubmatch(desc.String()); m != nil && !slices.Contains(d.names, m[1]) {
			d.names = append(d.names, m[1])
		}
	}
	return d.Registerer.Register(c)
}

// dashboardSeries returns the sprout_ series every query of the dashboard
// reads, with the suffixes of a histogram's series dropped when the
// histogram is registered.
func dashboardSeries(t *testing.T, dashboard []byte, registered []string) []string {
	t.Helper()
	var queries []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if expr, ok := v["expr"].(string); ok {
				queries = append(queries, expr)
			}
			for _, child := range v {
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	var doc any
	if err := json.Unmarshal(dashboard, &doc); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	walk(doc)
	if len(queries) == 0 {
		t.Fatal("the dashboard has no query")
	}
	series := regexp.MustCompile(`\bsprout_[a-z0-9_]+`)
	var out []string
	for _, q := range queries {
		names := series.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("the query %q reads no sprout_ series", q)
		}
		for _, name := range names {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(registered, base) {
					name = base
				}
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// documented reports whether docs/metrics.md names the series: in a table,
// or, for the work queues' series, in the list under their common prefix.
func documented(doc, name string) bool {
	if suffix, ok := strings.CutPrefix(name, "sprout_workqueue_"); ok {
		return strings.Contains(doc, "`sprout_workqueue_*`") && strings.Contains(doc, "`"+suffix+"`")
	}
	return strings.Contains(doc, "`"+name+"`")
}

// TestDashboardSeriesExist: every series the Grafana dashboard of
// deploy/monitoring queries is documented in docs/metrics.md and
// registered by the controller, so that no panel stays empty.
func TestDashboardSeriesExist(t *testing.T) {
	dashboard, err := os.ReadFile("monitoring/sprout.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	registered := registeredMetrics(t)
	for _, name := range dashboardSeries(t, dashboard, registered) {
		if !slices.Contains(registered, name) {
			t.Errorf("the dashboard queries %s, which the controller does not register (it registers %v)", name, registered)
		}
		if !documented(string(doc), name) {
			t.Errorf("the dashboard queries %s, which docs/metrics.md does not list", name)
		}
	}
}

// TestMonitoringKustomization: deploy/monitoring renders a ServiceMonitor
// that selects deploy/'s metrics Service by its port name, and the
// dashboard in a ConfigMap Grafana's sidecar loads; the control plane
// accepts both.
func TestMonitoringKustomization(t *testing.T) {
	objs := buildAt(t, "monitoring")
	monitors := ofKind(objs, "ServiceMonitor")
	configMaps := ofKind(objs, "ConfigMap")
	if len(monitors) != 1 || len(configMaps) != 1 || len(objs) != 2 {
		t.Fatalf("deploy/monitoring renders %d objects, want a ServiceMonitor and a ConfigMap", len(objs))
	}
	services := ofKind(build(t), "Service")
	if len(services) != 1 {
		t.Fatalf("deploy/ holds %d Services, want the metrics Service", len(services))
	}
	svc, sm := services[0], monitors[0]
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which Service %s's labels %v lack", k, v, svc.GetName(), svc.GetLabels())
		}
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	for _, e := range endpoints {
		port := e.(map[string]any)["port"]
		if !slices.ContainsFunc(ports, func(p any) bool { return p.(map[string]any)["name"] == port }) {
			t.Errorf("the ServiceMonitor scrapes port %v, which Service %s lacks", port, svc.GetName())
		}
	}
	if sm.GetNamespace() != svc.GetNamespace() {
		t.Errorf("the ServiceMonitor is in %q, the Service in %q", sm.GetNamespace(), svc.GetNamespace())
	}

	cm := configMaps[0]
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s: labels %v lack grafana_dashboard: \"1\"", cm.GetName(), cm.GetLabels())
	}
	dashboard, err := os.ReadFile("monitoring/sprout.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "sprout.json"); got != string(dashboard) {
		t.Errorf("ConfigMap %s does not hold monitoring/sprout.json", cm.GetName())
	}

	applyForReal(t, ofKind(build(t), "Namespace")...)
	installServiceMonitorCRD(t)
	applyForReal(t, objs...)
}
