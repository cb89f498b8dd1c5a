package v2beta1

import (
	"errors"
	"net/http"
	"net/url"
	"path"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// APIRead is the read an apiCall's urlPath makes on the API server, as an
// access review asks it: a get of one object, or a list of a resource in
// one namespace or all.
type APIRead struct {
	Verb      string
	Resource  schema.GroupVersionResource
	Namespace string
}

// requestInfos parses API server paths as the API server does.
var requestInfos = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// Request returns the request a urlPath makes, its path cleaned as the
// client sends it (Request.AbsPath), and the API server's reading of it:
// what is checked and served is what is sent.
func (c *ExternalAPICall) Request() (*url.URL, *request.RequestInfo, error) {
	u, err := url.Parse(c.URLPath)
	switch {
	case err != nil:
		return nil, nil, err
	case u.Path == "" || u.Path[0] != '/' || u.Host != "" || u.Scheme != "" || u.Opaque != "":
		return nil, nil, errors.New("want an absolute path, without a host")
	}
	u = &url.URL{Path: path.Clean(u.Path), RawQuery: u.RawQuery}
	info, err := requestInfos.NewRequestInfo(&http.Request{Method: http.MethodGet, URL: u})
	if err != nil {
		return nil, nil, err
	}
	return u, info, nil
}

// Read parses the urlPath: ok is false when it is not a get or a list of a
// resource (a non-resource path such as /version, a subresource, a
// watch).
func (c *ExternalAPICall) Read() (read APIRead, ok bool) {
	_, info, err := c.Request()
	if err != nil || !info.IsResourceRequest || info.Subresource != "" || (info.Verb != "get" && info.Verb != "list") {
		return APIRead{}, false
	}
	gvr := schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
	return APIRead{Verb: info.Verb, Resource: gvr, Namespace: info.Namespace}, true
}
