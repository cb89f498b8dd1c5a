package v2beta1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the version of GlobalContextEntry Sprout reads: the one
// Kyverno stores.
var GroupVersion = schema.GroupVersion{Group: "kyverno.io", Version: "v2beta1"}

// Resource is the GlobalContextEntry resource at GroupVersion.
var Resource = GroupVersion.WithResource("globalcontextentries")

// Kind is the kind of a GlobalContextEntry.
const Kind = "GlobalContextEntry"

// GlobalContextEntry is a cluster-scoped cache of data policies read with
// globalContext.Get: the objects of one resource, or the answer of one
// API call, and JMESPath projections of either.
type GlobalContextEntry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what the entry caches.
	Spec GlobalContextEntrySpec `json:"spec"`
	// Status says whether the data is loaded, and when an API call last
	// succeeded.
	// +optional
	Status GlobalContextEntryStatus `json:"status,omitempty"`
}

// GlobalContextEntrySpec holds exactly one of KubernetesResource and APICall.
type GlobalContextEntrySpec struct {
	// KubernetesResource caches every object of a resource, in one namespace
	// or in all.
	// +optional
	KubernetesResource *KubernetesResource `json:"kubernetesResource,omitempty"`
	// APICall caches the JSON answer of a web service, called at
	// RefreshInterval.
	// +optional
	APICall *ExternalAPICall `json:"apiCall,omitempty"`
	// Projections are JMESPath expressions over the data, each read by its
	// name as globalContext.Get's second argument.
	// +optional
	Projections []GlobalContextEntryProjection `json:"projections,omitempty"`
}

// KubernetesResource names the resource an entry caches.
type KubernetesResource struct {
	// Group is the resource's API group; empty for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// Version is the resource's API version.
	Version string `json:"version"`
	// Resource is the resource's plural name, such as "deployments".
	Resource string `json:"resource"`
	// Namespace confines the entry to one namespace; empty for all, or for
	// a cluster-scoped resource.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// GVR is the resource the entry caches.
func (k KubernetesResource) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
}

// ExternalAPICall is a call Kyverno's APICall spells, polled.
type ExternalAPICall struct {
	// URLPath is a path on the Kubernetes API server, as `kubectl get --raw`
	// takes it: a resource or one object, read (GET) with Sprout's rights
	// at RefreshInterval, and served to a policy only if its account may
	// read it too. The data is the API server's JSON answer.
	// +optional
	URLPath string `json:"urlPath,omitempty"`
	// Method is GET (the default) or POST.
	// +optional
	Method string `json:"method,omitempty"`
	// Data is the POST body: a JSON object of these keys and values.
	// +optional
	Data []RequestData `json:"data,omitempty"`
	// Service is a JSON web service to call.
	// +optional
	Service *ServiceCall `json:"service,omitempty"`
	// RefreshInterval is how often the call is made; Kyverno's CRD
	// defaults it to 10m.
	// +optional
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`
	// RetryLimit is how many times one refresh tries the call; Kyverno's
	// CRD defaults it to 3.
	// +optional
	RetryLimit int `json:"retryLimit,omitempty"`
}

// RequestData is one key of a POST body.
type RequestData struct {
	// Key is the body's key.
	Key string `json:"key"`
	// Value is the key's JSON value.
	Value *apiextensionsv1.JSON `json:"value"`
}

// ServiceCall is a web service's URL, headers and CA bundle.
type ServiceCall struct {
	// URL is the service's URL.
	URL string `json:"url"`
	// Headers are sent with every call.
	// +optional
	Headers []HTTPHeader `json:"headers,omitempty"`
	// CABundle is PEM certificates the service's certificate must chain to.
	// +optional
	CABundle string `json:"caBundle,omitempty"`
}

// HTTPHeader is one header of a call.
type HTTPHeader struct {
	// Key is the header's name.
	Key string `json:"key"`
	// Value is the header's value.
	Value string `json:"value"`
}

// GlobalContextEntryProjection is a named JMESPath expression over the data.
type GlobalContextEntryProjection struct {
	// Name is how globalContext.Get names the projection.
	Name string `json:"name"`
	// JMESPath is the expression.
	JMESPath string `json:"jmesPath"`
}

// GlobalContextEntryStatus is what Kyverno reports of an entry.
type GlobalContextEntryStatus struct {
	// Ready is Kyverno's deprecated flag; Sprout leaves it unset.
	// +optional
	Ready *bool `json:"ready,omitempty"`
	// Conditions hold Ready: Succeeded when the data is loaded, Failed with
	// the reason otherwise.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastRefreshTime is when an API call last succeeded.
	// +optional
	LastRefreshTime metav1.Time `json:"lastRefreshTime,omitempty"`
}

// Condition and reasons of an entry's status, Kyverno's.
const (
	ConditionReady  = "Ready"
	ReasonSucceeded = "Succeeded"
	ReasonFailed    = "Failed"
)
