package policyreport

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// report is a report as it is sent: its JSON is the report Kyverno's
// reports controller writes. It is encoded from Go types rather than from
// an unstructured map, which costs a report write several times the CPU.
type report struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	// Scope is the trigger.
	Scope corev1.ObjectReference `json:"scope"`
	// Source is set, to "", in openreports.io reports only.
	Source  *string        `json:"source,omitempty"`
	Results []resultRecord `json:"results"`
	Summary summary        `json:"summary"`
}

// resultRecord is one result as a report holds it; scored, message,
// category, severity and properties are left out when empty, as Kyverno's
// types leave them out.
type resultRecord struct {
	Source     string            `json:"source"`
	Policy     string            `json:"policy"`
	Rule       string            `json:"rule"`
	Result     string            `json:"result"`
	Scored     bool              `json:"scored,omitempty"`
	Message    string            `json:"message,omitempty"`
	Category   string            `json:"category,omitempty"`
	Severity   string            `json:"severity,omitempty"`
	Timestamp  timestamp         `json:"timestamp"`
	Properties map[string]string `json:"properties,omitempty"`
}

type timestamp struct {
	Seconds int64 `json:"seconds"`
	Nanos   int64 `json:"nanos"`
}

type summary struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Warn  int `json:"warn"`
	Error int `json:"error"`
	Skip  int `json:"skip"`
}

// reportOf is the report of trigger t with results in api, as Kyverno's
// reports controller makes it: named by the trigger's UID, in its
// namespace, scoped to and owned by it, its results sorted by policy and
// counted in its summary. An openreports.io report has a source, which
// Kyverno leaves empty (pkg/utils/report NewPolicyReport); its results
// have the same fields as wgpolicyk8s.io's, message and resources included
// (openreports' Description and Subjects).
func reportOf(api API, t Trigger, results entries) *report {
	kind, clusterKind := api.kinds()
	if t.Namespace == "" {
		kind = clusterKind
	}
	gv, _ := api.resources()
	r := &report{
		APIVersion: gv.GroupVersion().String(), Kind: kind,
		Metadata: metav1.ObjectMeta{
			Name: string(t.UID), Namespace: t.Namespace,
			Labels:          map[string]string{LabelManagedBy: ManagedBy},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: t.APIVersion, Kind: t.Kind, Name: t.Name, UID: t.UID}},
		},
		Scope:   corev1.ObjectReference{APIVersion: t.APIVersion, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, UID: t.UID},
		Results: make([]resultRecord, 0, len(results)),
	}
	if api == OpenReports {
		r.Source = new(string)
	}
	for i := range results {
		rec := recordOf(&results[i])
		switch rec.Result {
		case StatusPass:
			r.Summary.Pass++
		case StatusSkip:
			r.Summary.Skip++
		case StatusError:
			r.Summary.Error++
		case "fail":
			r.Summary.Fail++
		case "warn":
			r.Summary.Warn++
		}
		r.Results = append(r.Results, rec)
	}
	return r
}

func recordOf(e *entry) resultRecord {
	r := e.said.Value()
	rec := resultRecord{
		Source: Source, Policy: r.policy, Rule: r.rule, Result: r.status, Scored: r.scored,
		Message: r.message, Category: r.category, Severity: r.severity,
		Timestamp: timestamp{Seconds: e.at},
	}
	if len(e.props) > 0 {
		rec.Properties = make(map[string]string, len(e.props)/2)
		for i := 0; i < len(e.props); i += 2 {
			rec.Properties[e.props[i]] = e.props[i+1]
		}
	}
	return rec
}
