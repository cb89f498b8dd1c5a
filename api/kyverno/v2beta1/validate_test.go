package v2beta1_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
)

func TestValidateNamesTheField(t *testing.T) {
	res := &v2beta1.KubernetesResource{Version: "v1", Resource: "configmaps"}
	call := func(mod func(*v2beta1.ExternalAPICall)) *v2beta1.ExternalAPICall {
		c := &v2beta1.ExternalAPICall{Service: &v2beta1.ServiceCall{URL: "https://api.example.com/teams"}}
		mod(c)
		return c
	}
	tests := []struct {
		name string
		spec v2beta1.GlobalContextEntrySpec
		want string // "" for valid
	}{
		{name: "resource", spec: v2beta1.GlobalContextEntrySpec{KubernetesResource: res}},
		{name: "api call", spec: v2beta1.GlobalContextEntrySpec{APICall: call(func(*v2beta1.ExternalAPICall) {})}},
		{name: "neither", want: "spec.kubernetesResource: Required"},
		{name: "both", spec: v2beta1.GlobalContextEntrySpec{KubernetesResource: res, APICall: call(func(*v2beta1.ExternalAPICall) {})},
			want: "spec.apiCall: Forbidden"},
		{name: "group missing", spec: v2beta1.GlobalContextEntrySpec{KubernetesResource: &v2beta1.KubernetesResource{Version: "v1beta1", Resource: "x"}},
			want: "spec.kubernetesResource.group: Required"},
		{name: "urlPath", spec: v2beta1.GlobalContextEntrySpec{APICall: &v2beta1.ExternalAPICall{URLPath: "/api/v1/namespaces/a/secrets"}}},
		{name: "urlPath of an object", spec: v2beta1.GlobalContextEntrySpec{APICall: &v2beta1.ExternalAPICall{URLPath: "/apis/apps/v1/deployments?limit=5"}}},
		{name: "urlPath not of a resource", spec: v2beta1.GlobalContextEntrySpec{APICall: &v2beta1.ExternalAPICall{URLPath: "/version"}},
			want: "spec.apiCall.urlPath: Invalid"},
		{name: "urlPath of a subresource", spec: v2beta1.GlobalContextEntrySpec{APICall: &v2beta1.ExternalAPICall{URLPath: "/api/v1/namespaces/a/pods/p/log"}},
			want: "spec.apiCall.urlPath: Invalid"},
		{name: "urlPath posted", spec: v2beta1.GlobalContextEntrySpec{APICall: &v2beta1.ExternalAPICall{URLPath: "/api/v1/namespaces", Method: "POST"}},
			want: "spec.apiCall.method: Forbidden"},
		{name: "urlPath and service", spec: v2beta1.GlobalContextEntrySpec{APICall: call(func(c *v2beta1.ExternalAPICall) { c.URLPath = "/api/v1/namespaces" })},
			want: "spec.apiCall.service: Forbidden"},
		{name: "bad url", spec: v2beta1.GlobalContextEntrySpec{APICall: call(func(c *v2beta1.ExternalAPICall) { c.Service.URL = "file:///etc" })},
			want: "spec.apiCall.service.url: Invalid"},
		{name: "data with GET", spec: v2beta1.GlobalContextEntrySpec{APICall: call(func(c *v2beta1.ExternalAPICall) {
			c.Data = []v2beta1.RequestData{{Key: "a"}}
		})}, want: "spec.apiCall.data: Forbidden"},
		{name: "short refresh", spec: v2beta1.GlobalContextEntrySpec{APICall: call(func(c *v2beta1.ExternalAPICall) {
			c.RefreshInterval = &metav1.Duration{Duration: time.Millisecond}
		})}, want: "spec.apiCall.refreshInterval: Invalid"},
		{name: "bad projection", spec: v2beta1.GlobalContextEntrySpec{KubernetesResource: res,
			Projections: []v2beta1.GlobalContextEntryProjection{{Name: "p", JMESPath: "items[?"}}},
			want: "spec.projections[0].jmesPath: Invalid"},
		{name: "projection named as the entry", spec: v2beta1.GlobalContextEntrySpec{KubernetesResource: res,
			Projections: []v2beta1.GlobalContextEntryProjection{{Name: "entry", JMESPath: "length(@)"}}},
			want: "spec.projections[0].name: Invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &v2beta1.GlobalContextEntry{ObjectMeta: metav1.ObjectMeta{Name: "entry"}, Spec: tt.spec}
			err := e.Validate().ToAggregate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("want %q, got %v", tt.want, err)
			}
		})
	}
}

// A urlPath is read as the access review of its reading policy asks it.
func TestURLPathRead(t *testing.T) {
	for path, want := range map[string]v2beta1.APIRead{
		"/api/v1/namespaces/a/configmaps":   {Verb: "list", Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "a"},
		"/api/v1/namespaces/a/configmaps/b": {Verb: "get", Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "a"},
		"/apis/apps/v1/deployments?limit=1": {Verb: "list", Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
		"/api/v1/namespaces/kube-system":    {Verb: "get", Resource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Namespace: "kube-system"},
		// Read as the client sends it: cleaned.
		"/api/v1/namespaces/x/../a/configmaps/": {Verb: "list", Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "a"},
	} {
		got, ok := (&v2beta1.ExternalAPICall{URLPath: path}).Read()
		if !ok || got != want {
			t.Errorf("%s: read as %+v (%v), want %+v", path, got, ok, want)
		}
	}
}
