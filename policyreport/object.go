package policyreport

import (
	"slices"
	"strings"

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

// stamped is a result with the time, in seconds, it was first given.
type stamped struct {
	res *Result
	at  int64
}

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
func reportObject(t Trigger, results []stamped) *unstructured.Unstructured {
	slices.SortFunc(results, func(a, b stamped) int {
		if c := strings.Compare(a.res.Policy, b.res.Policy); c != 0 {
			return c
		}
		return strings.Compare(a.res.Rule, b.res.Rule)
	})
	summary := map[string]any{"pass": int64(0), "fail": int64(0), "warn": int64(0), "error": int64(0), "skip": int64(0)}
	items := make([]any, 0, len(results))
	for _, r := range results {
		summary[r.res.Result] = summary[r.res.Result].(int64) + 1
		items = append(items, resultObject(r))
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

func resultObject(s stamped) map[string]any {
	r := s.res
	o := map[string]any{
		"source": Source, "policy": r.Policy, "rule": r.Rule, "result": r.Result, "scored": r.Scored,
		"timestamp": map[string]any{"seconds": s.at, "nanos": int64(0)},
	}
	if r.Message != "" {
		o["message"] = r.Message
	}
	if r.Category != "" {
		o["category"] = r.Category
	}
	if r.Severity != "" {
		o["severity"] = r.Severity
	}
	if len(r.Properties) > 0 {
		props := make(map[string]any, len(r.Properties))
		for k, v := range r.Properties {
			props[k] = v
		}
		o["properties"] = props
	}
	return o
}
