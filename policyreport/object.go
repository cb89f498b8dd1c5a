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

// LabelManagedBy is the label Kyverno sets on its reports; Sprout sets it to
// ManagedBy on its own.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "sprout"
)

// resourceOf is the report resource for trigger t.
func resourceOf(t Trigger) schema.GroupVersionResource {
	if t.Namespace == "" {
		return ClusterPolicyReports
	}
	return PolicyReports
}

// reportObject is the report of trigger t with results, as Kyverno's
// reports controller makes it: named by the trigger's UID, in its
// namespace, scoped to and owned by it, its results sorted by policy and
// rule and counted in its summary.
func reportObject(t Trigger, results entries) *unstructured.Unstructured {
	summary := map[string]any{"pass": int64(0), "fail": int64(0), "warn": int64(0), "error": int64(0), "skip": int64(0)}
	items := make([]any, 0, len(results))
	for _, r := range results {
		summary[r.status] = summary[r.status].(int64) + 1
		items = append(items, resultObject(&r))
	}
	kind := "PolicyReport"
	if t.Namespace == "" {
		kind = "ClusterPolicyReport"
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
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": kind, "metadata": meta,
		"scope": scope, "results": items, "summary": summary,
	}}
}

func resultObject(r *entry) map[string]any {
	o := map[string]any{
		"source": Source, "policy": r.policy, "rule": r.rule, "result": r.status, "scored": r.scored,
		"timestamp": map[string]any{"seconds": r.at, "nanos": int64(0)},
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
	if len(r.props) > 0 {
		props := make(map[string]any, len(r.props)/2)
		for i := 0; i < len(r.props); i += 2 {
			props[r.props[i]] = r.props[i+1]
		}
		o["properties"] = props
	}
	return o
}
