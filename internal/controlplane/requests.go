package controlplane

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// ObjectPath is the path of the object a request to the API server is
// about, for tests that count writes by object: for a create, posted to its
// collection, the collection and the name in its body, JSON or protobuf
// (which it reads and puts back); for any other request, its path.
func ObjectPath(r *http.Request) string {
	if r.Method != http.MethodPost || r.Body == nil {
		return r.URL.Path
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return r.URL.Path
	}
	if name := postedName(body, r.Header.Get("Content-Type")); name != "" {
		return r.URL.Path + "/" + name
	}
	return r.URL.Path
}

// protobufCodec decodes the protobuf bodies of built-in types.
var protobufCodec = protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)

// postedName is the name of the object body encodes, or "".
func postedName(body []byte, contentType string) string {
	if contentType == runtime.ContentTypeProtobuf {
		obj, _, err := protobufCodec.Decode(body, nil, nil)
		if err != nil {
			return ""
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return ""
		}
		return m.GetName()
	}
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	return obj.Metadata.Name
}
