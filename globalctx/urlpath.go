package globalctx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// KeyHolder tells which Secret holds Sprout's proof key
// (cluster.ProofKey.Holds). A urlPath is read with Sprout's rights, which
// read that Secret; a policy that read the key could forge the proofs that
// make Sprout prune or claim an object.
type KeyHolder interface {
	Holds(namespace, name string) bool
}

// KeySecret is the KeyHolder of one Secret, Namespace/Name: the Secret
// `sprout run --proof-key-secret` names.
type KeySecret struct{ Namespace, Name string }

// Holds reports whether the Secret namespace/name is k.
func (k KeySecret) Holds(namespace, name string) bool { return k == KeySecret{namespace, name} }

// keyGuard keeps the proof key out of what one urlPath serves, as the API
// server parses the path: a get of the key's Secret is answered as for a
// Secret that does not exist, a list of Secrets is served without it,
// and a watch, whose events no answer can be filtered from, is refused.
type keyGuard struct {
	key  KeyHolder
	info *request.RequestInfo
}

// newKeyGuard guards the request u, read as info; it fails for a watch.
func newKeyGuard(key KeyHolder, u *url.URL, info *request.RequestInfo) (keyGuard, error) {
	if info.IsResourceRequest && info.Verb == "watch" {
		return keyGuard{}, fmt.Errorf("spec.apiCall.urlPath: %s is a watch, which is not served: an entry is read again at its refresh interval", u)
	}
	return keyGuard{key: key, info: info}, nil
}

// readsSecrets reports whether the request reads core Secrets.
func (g keyGuard) readsSecrets() bool {
	return g.key != nil && g.info.IsResourceRequest && g.info.APIGroup == "" && g.info.Resource == "secrets"
}

// hidden returns the error of a get of the key's Secret: the one the
// client makes of the API server's answer for a Secret that does not
// exist (rest.Result.Raw), which quotes no name. It is nil for any other
// read.
func (g keyGuard) hidden() error {
	if g.readsSecrets() && g.info.Verb == "get" && g.key.Holds(g.info.Namespace, g.info.Name) {
		return apierrors.NewGenericServerResponse(http.StatusNotFound, http.MethodGet, schema.GroupResource{}, "", "unknown", 0, true)
	}
	return nil
}

// filter drops the key's Secret from raw, the answer of a list of Secrets;
// any other answer is returned as it is.
func (g keyGuard) filter(raw []byte) ([]byte, error) {
	if !g.readsSecrets() || g.info.Verb != "list" {
		return raw, nil
	}
	var list map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	items, _ := list["items"].([]any)
	kept := make([]any, 0, len(items))
	for _, item := range items {
		obj, _ := item.(map[string]any)
		meta, _ := obj["metadata"].(map[string]any)
		namespace, _ := meta["namespace"].(string)
		name, _ := meta["name"].(string)
		if !g.key.Holds(namespace, name) {
			kept = append(kept, item)
		}
	}
	if len(kept) == len(items) {
		return raw, nil
	}
	list["items"] = kept
	return json.Marshal(list)
}
