package globalctx

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
)

func guardOf(t *testing.T, urlPath string) (keyGuard, error) {
	t.Helper()
	u, info, err := (&v2beta1.ExternalAPICall{URLPath: urlPath}).Request()
	if err != nil {
		t.Fatalf("%s: %v", urlPath, err)
	}
	return newKeyGuard(KeySecret{"home", "key"}, u, info)
}

// The guard reads a urlPath as the API server reads the request sent: a
// get of the key's Secret is hidden, however the path is written; a get
// of anything else, or a path that names no resource, is not.
func TestKeyGuardHidesTheKeysSecret(t *testing.T) {
	for path, hidden := range map[string]bool{
		"/api/v1/namespaces/home/secrets/key":                   true,
		"/api/v1/namespaces/home/secrets/key/":                  true,
		"/api/v1/namespaces/other/../home/./secrets//key":       true,
		"/api/v1/namespaces/home/secrets/key?resourceVersion=0": true,
		"/api/v1/namespaces/home/secrets/other":                 false,
		"/api/v1/namespaces/other/secrets/key":                  false,
		"/api/v1/namespaces/home/configmaps/key":                false,
		"/apis/example.com/v1/namespaces/home/secrets/key":      false,
		"/version": false,
		"/apis":    false,
		"/api/v1/namespaces/home/secrets?fieldSelector=metadata.name%3Dkey": false,
	} {
		g, err := guardOf(t, path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got := g.hidden() != nil; got != hidden {
			t.Errorf("%s: hidden %v, want %v", path, got, hidden)
		}
	}
}

// A watch, by its parameter or by the old /watch/ path, is refused naming
// the field.
func TestKeyGuardRefusesWatches(t *testing.T) {
	for _, path := range []string{
		"/api/v1/namespaces/home/secrets?watch=true",
		"/api/v1/secrets?watch=1",
		"/api/v1/watch/namespaces/home/secrets",
	} {
		if _, err := guardOf(t, path); err == nil || !strings.Contains(err.Error(), "spec.apiCall.urlPath") {
			t.Errorf("%s: want an error naming spec.apiCall.urlPath, got %v", path, err)
		}
	}
}

// A list of Secrets is served without the key's, any other list as it is.
func TestKeyGuardFiltersLists(t *testing.T) {
	raw := []byte(`{"kind":"SecretList","metadata":{"resourceVersion":"12345678901234567890"},"items":[` +
		`{"metadata":{"namespace":"home","name":"key"}},{"metadata":{"namespace":"home","name":"other"}},"odd"]}`)
	for path, want := range map[string]int{
		"/api/v1/secrets":                    2,
		"/api/v1/namespaces/home/secrets":    2,
		"/api/v1/namespaces/home/configmaps": 3,
		"/apis/example.com/v1/secrets":       3,
	} {
		g, err := guardOf(t, path)
		if err != nil {
			t.Fatal(err)
		}
		out, err := g.filter(raw)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var list struct {
			Metadata struct{ ResourceVersion string }
			Items    []any
		}
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != want || list.Metadata.ResourceVersion != "12345678901234567890" {
			t.Errorf("%s: got %s, want %d items", path, out, want)
		}
	}
}
