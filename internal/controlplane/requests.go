package controlplane

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// ObjectPath is the path of the object a request to the API server is
// about, for tests that count writes by object: for a create, posted to its
// collection, the collection and the name in its body (which it reads and
// puts back); for any other request, its path.
func ObjectPath(r *http.Request) string {
	if r.Method != http.MethodPost || r.Body == nil {
		return r.URL.Path
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err != nil || json.Unmarshal(body, &obj) != nil || obj.Metadata.Name == "" {
		return r.URL.Path
	}
	return r.URL.Path + "/" + obj.Metadata.Name
}
