package policyreport

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version are the report API Kyverno 1.19 writes by default.
const (
	Group   = "wgpolicyk8s.io"
	Version = "v1alpha2"
)

// The report resources: namespaced, and cluster-scoped for cluster-scoped
// triggers.
var (
	PolicyReports        = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "policyreports"}
	ClusterPolicyReports = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "clusterpolicyreports"}
)

// The openreports.io API, which Kyverno 1.19 writes in place of
// wgpolicyk8s.io with --openreportsEnabled.
const (
	OpenReportsGroup   = "openreports.io"
	OpenReportsVersion = "v1alpha1"
)

// The openreports.io report resources.
var (
	Reports        = schema.GroupVersionResource{Group: OpenReportsGroup, Version: OpenReportsVersion, Resource: "reports"}
	ClusterReports = schema.GroupVersionResource{Group: OpenReportsGroup, Version: OpenReportsVersion, Resource: "clusterreports"}
)

// API is the report API a Writer writes.
type API int

// The report APIs: Kyverno's default, and openreports.io.
const (
	WGPolicy API = iota
	OpenReports
)

// resources are the namespaced and the cluster-scoped report resources of a.
func (a API) resources() (namespaced, cluster schema.GroupVersionResource) {
	if a == OpenReports {
		return Reports, ClusterReports
	}
	return PolicyReports, ClusterPolicyReports
}

// kinds are the namespaced and the cluster-scoped report kinds of a.
func (a API) kinds() (namespaced, cluster string) {
	if a == OpenReports {
		return "Report", "ClusterReport"
	}
	return "PolicyReport", "ClusterPolicyReport"
}

// resourceOf is a's report resource for trigger t.
func (a API) resourceOf(t Trigger) schema.GroupVersionResource {
	namespaced, cluster := a.resources()
	if t.Namespace == "" {
		return cluster
	}
	return namespaced
}

// LabelManagedBy is the label Kyverno sets on its reports; Sprout sets it to
// ManagedBy on its own.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "sprout"
)

// reportObject is the report of trigger t with results in api, as
// Kyverno's reports controller makes it: named by the trigger's UID, in
// its namespace, scoped to and owned by it, its results sorted by policy
// and counted in its summary. An openreports.io report has a
// source, which Kyverno leaves empty (pkg/utils/report NewPolicyReport);
// its results have the same fields as wgpolicyk8s.io's, message and
// resources included (openreports' Description and Subjects).
func reportObject(api API, t Trigger, results entries) *unstructured.Unstructured {
	summary := map[string]any{"pass": int64(0), "fail": int64(0), "warn": int64(0), "error": int64(0), "skip": int64(0)}
	items := make([]any, 0, len(results))
	for i := range results {
		status := results[i].said.Value().status
		if n, ok := summary[status].(int64); ok {
			summary[status] = n + 1
		}
		items = append(items, resultObject(&results[i]))
	}
	kind, clusterKind := api.kinds()
	if t.Namespace == "" {
		kind = clusterKind
	}
	meta := map[string]any{
		"name":   string(t.UID),
		"labels": map[string]any{LabelManagedBy: ManagedBy},
		"ownerReferences": []any{map[string]any{
			"apiVersion": t.APIVersion, "kind": t.Kind, "name": t.Name, "uid": string(t.UID),
		}},
	}
	scope := map[string]any{"apiVersion": t.APIVersion, "kind": t.Kind, "name": t.Name, "uid": string(t.UID)}
	if t.Namespace != "" {
		meta["namespace"] = t.Namespace
		scope["namespace"] = t.Namespace
	}
	gv, _ := api.resources()
	report := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gv.GroupVersion().String(), "kind": kind, "metadata": meta,
		"scope": scope, "results": items, "summary": summary,
	}}
	if api == OpenReports {
		report.Object["source"] = ""
	}
	return report
}

func resultObject(e *entry) map[string]any {
	r := e.said.Value()
	o := map[string]any{
		"source": Source, "policy": r.policy, "rule": r.rule, "result": r.status,
		"timestamp": map[string]any{"seconds": e.at, "nanos": int64(0)},
	}
	if r.scored {
		o["scored"] = true // omitted when false, as Kyverno's types omit it
	}
	if r.message != "" {
		o["message"] = r.message
	}
	if r.category != "" {
		o["category"] = r.category
	}
	if r.severity != "" {
		o["severity"] = r.severity
	}
	if len(e.props) > 0 {
		props := make(map[string]any, len(e.props)/2)
		for i := 0; i < len(e.props); i += 2 {
			props[e.props[i]] = e.props[i+1]
		}
		o["properties"] = props
	}
	return o
}
