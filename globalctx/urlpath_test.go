package globalctx_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
	"github.com/sprout-gitops/sprout/globalctx"
)

// testKey is where the tests keep the proof key: a Secret like the one
// `sprout run` creates, labelled as it labels it.
var testKey = globalctx.KeySecret{Namespace: "sprout-home", Name: "sprout-proof-key"}

// keyStore creates the key's Secret beside another in its namespace and a
// third elsewhere, all labelled app.kubernetes.io/name: sprout, and runs a
// store that reads urlPaths with the API server's administrator's rights
// and hides the key.
func keyStore(t *testing.T) *globalctx.Store {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cfg)
	for _, s := range [][2]string{{testKey.Namespace, testKey.Name}, {testKey.Namespace, "other"}, {"sprout-elsewhere", "app"}} {
		_, _ = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s[0]}}, metav1.CreateOptions{})
		if _, err := kube.CoreV1().Secrets(s[0]).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s[1], Labels: map[string]string{"app.kubernetes.io/name": "sprout"}},
			Data:       map[string][]byte{"key": []byte("not to be read")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Secrets(s[0]).Delete(context.Background(), s[1], metav1.DeleteOptions{}) })
	}
	api := discovery.NewDiscoveryClientForConfigOrDie(cfg).RESTClient()
	store := globalctx.New(globalctx.Options{Client: dynamic.NewForConfigOrDie(cfg), API: api, ProofKey: testKey})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); store.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	return store
}

// readPath creates an entry reading urlPath and returns what the store
// serves of it once loaded.
func readPath(t *testing.T, store *globalctx.Store, name, urlPath string) (any, error) {
	t.Helper()
	entries := dynamic.NewForConfigOrDie(cfg).Resource(v2beta1.Resource)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v2beta1.GroupVersion.String(), "kind": v2beta1.Kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"apiCall": map[string]any{"urlPath": urlPath}},
	}}
	if _, err := entries.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = entries.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	poll(t, name+" seen", func(ctx context.Context) (bool, error) {
		_, found, _ := store.Get(ctx, name, "")
		return found, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, _, err := store.Get(ctx, name, "")
	return v, err
}

// secretNames returns namespace/name of each item of a SecretList.
func secretNames(t *testing.T, v any) []string {
	t.Helper()
	list, _ := v.(map[string]any)
	if list["kind"] != "SecretList" {
		t.Fatalf("want a SecretList, got %v", v)
	}
	var names []string
	for _, item := range list["items"].([]any) {
		meta := item.(map[string]any)["metadata"].(map[string]any)
		names = append(names, meta["namespace"].(string)+"/"+meta["name"].(string))
	}
	return names
}

// An entry that reads the proof key's Secret by name is answered as for a
// Secret that does not exist.
func TestURLPathGetOfTheProofKeyIsNotFound(t *testing.T) {
	store := keyStore(t)
	prefix := "/api/v1/namespaces/" + testKey.Namespace + "/secrets/"
	v, keyErr := readPath(t, store, "key-get", prefix+testKey.Name)
	if keyErr == nil {
		t.Fatalf("the key's Secret was served: %v", v)
	}
	_, absentErr := readPath(t, store, "absent-get", prefix+"absent")
	if absentErr == nil {
		t.Fatal("an absent Secret was served")
	}
	if got, want := strings.ReplaceAll(keyErr.Error(), testKey.Name, "absent"), absentErr.Error(); got != want {
		t.Fatalf("the key's Secret: want the error of an absent Secret, %q, got %q", want, keyErr)
	}
	// The path as the API server reads it: cleaned, with a trailing slash.
	if v, err := readPath(t, store, "key-get-dots", "/api/v1/namespaces/elsewhere/../"+testKey.Namespace+"/secrets/"+testKey.Name+"/"); err == nil {
		t.Fatalf("the key's Secret, by a path with dots, was served: %v", v)
	}
}

// An entry that lists Secrets, in the key's namespace, cluster-wide, or
// with selectors that pick the key, gets every Secret but the key's.
func TestURLPathListOfSecretsLeavesTheProofKeyOut(t *testing.T) {
	store := keyStore(t)
	home := "/api/v1/namespaces/" + testKey.Namespace + "/secrets"
	for name, tt := range map[string]struct {
		path string
		want []string
	}{
		"list-home":      {home, []string{testKey.Namespace + "/other"}},
		"list-all":       {"/api/v1/secrets", []string{"sprout-elsewhere/app", testKey.Namespace + "/other"}},
		"list-by-name":   {home + "?fieldSelector=metadata.name%3D" + testKey.Name, nil},
		"list-by-label":  {"/api/v1/secrets?labelSelector=app.kubernetes.io%2Fname%3Dsprout", []string{"sprout-elsewhere/app", testKey.Namespace + "/other"}},
		"list-elsewhere": {"/api/v1/namespaces/sprout-elsewhere/secrets", []string{"sprout-elsewhere/app"}},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := readPath(t, store, name, tt.path)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.DeleteFunc(secretNames(t, v), func(n string) bool {
				// Secrets of other tests and of the API server itself.
				return !strings.HasPrefix(n, testKey.Namespace+"/") && !strings.HasPrefix(n, "sprout-elsewhere/")
			})
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("want %v, got %v", tt.want, got)
			}
		})
	}
}

// A watch is refused, naming the field: its events cannot be kept from
// the key.
func TestURLPathWatchIsRefused(t *testing.T) {
	store := keyStore(t)
	for name, path := range map[string]string{
		"watch-param": "/api/v1/namespaces/" + testKey.Namespace + "/secrets?watch=1",
		"watch-path":  "/api/v1/watch/secrets",
	} {
		v, err := readPath(t, store, name, path)
		if err == nil || !strings.Contains(err.Error(), "spec.apiCall.urlPath") {
			t.Fatalf("%s: want an error naming spec.apiCall.urlPath, got %v (%v)", path, err, v)
		}
	}
}
