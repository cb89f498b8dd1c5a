package evaluate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
)

// TestReaderServesTheCaches: Get and List answer from the cache of their
// resource, in the policy's scope; a Get of an object not cached is
// NotFound; each resource is told read once, and counted at every read.
func TestReaderServesTheCaches(t *testing.T) {
	caches := &fakeCaches{stores: map[schema.GroupVersionResource]cache.Store{
		configMaps: cached(t, configMap("team", "a", map[string]string{"app": "x"}), configMap("team", "b", nil), configMap("other", "c", map[string]string{"app": "x"})),
	}}
	var told []string
	e := New(Config{Cache: caches.cache})
	r := e.Reader(Sync{Scope: "team", Read: func(gvr schema.GroupVersionResource) { told = append(told, gvr.Resource) }})
	ctx := context.Background()

	got, err := r.Get(ctx, configMaps, "team", "a")
	if err != nil || got["metadata"].(map[string]any)["name"] != "a" {
		t.Fatalf("Get team/a: %v, %v", got, err)
	}
	if _, err := r.Get(ctx, configMaps, "team", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("Get team/missing: %v, want NotFound", err)
	}
	list, err := r.List(ctx, configMaps, "", labels.SelectorFromSet(labels.Set{"app": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, item := range list["items"].([]any) {
		names = append(names, item.(map[string]any)["metadata"].(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	if fmt.Sprint(names) != "[a c]" {
		t.Errorf("List app=x: %v, want [a c]", names)
	}
	if fmt.Sprint(told) != "[configmaps]" || r.Reads() != 3 || !r.Resources().Has(configMaps) {
		t.Errorf("told %v, %d reads, resources %v; want configmaps told once, 3 reads", told, r.Reads(), r.Resources().UnsortedList())
	}
	if fmt.Sprint(caches.asked) != "[team/configmaps team/configmaps team/configmaps]" {
		t.Errorf("caches asked %v, in the policy's scope each time", caches.asked)
	}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	if _, err := r.Get(ctx, secrets, "team", "s"); err == nil {
		t.Error("Get of a resource not watched: no error")
	}
}

// TestReaderAsksOnceForEachKindOfRead: a policy that runs as an account
// reads only what the account may; the answer is asked once per verb,
// resource and namespace in a sync, and a denied read reaches no cache.
func TestReaderAsksOnceForEachKindOfRead(t *testing.T) {
	caches := &fakeCaches{stores: map[schema.GroupVersionResource]cache.Store{configMaps: cached(t, configMap("team", "a", nil))}}
	denied := errors.New("denied")
	var asked []string
	may := func(_ context.Context, verb string, gvr schema.GroupVersionResource, namespace string) error {
		asked = append(asked, verb+" "+namespace)
		if namespace == "other" {
			return denied
		}
		return nil
	}
	r := New(Config{Cache: caches.cache}).Reader(Sync{May: may})
	ctx := context.Background()
	for range 2 {
		if _, err := r.Get(ctx, configMaps, "team", "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.List(ctx, configMaps, "other", nil); !errors.Is(err, denied) {
			t.Errorf("List in other: %v, want denied", err)
		}
	}
	if fmt.Sprint(asked) != "[get team list other]" {
		t.Errorf("asked %v, want each once", asked)
	}
	if len(caches.asked) != 2 {
		t.Errorf("caches asked %v: the denied List read one", caches.asked)
	}
}

// TestReaderRecordsEachEvaluationsReads: reads are noted on the tape only
// while one records, a Get that finds nothing included.
func TestReaderRecordsEachEvaluationsReads(t *testing.T) {
	caches := &fakeCaches{stores: map[schema.GroupVersionResource]cache.Store{configMaps: cached(t, configMap("team", "a", nil))}}
	r := New(Config{Cache: caches.cache}).Reader(Sync{})
	ctx := context.Background()
	_, _ = r.Get(ctx, configMaps, "team", "a")
	r.Record()
	if tape := r.Recorded(); !tape.Empty() {
		t.Error("a read before Record is on the tape")
	}
	r.Record()
	_, _ = r.Get(ctx, configMaps, "team", "missing")
	if tape := r.Recorded(); tape.Empty() {
		t.Error("a Get that found nothing is not on the tape")
	}
	if tape := r.Recorded(); !tape.Empty() {
		t.Error("Recorded twice: the second tape is not empty")
	}
}

// entries is a GlobalContext of fixed values; cm caches ConfigMaps of team.
type entries map[string]any

func (e entries) Get(_ context.Context, name, _ string) (any, bool, error) {
	v, ok := e[name]
	return v, ok, nil
}

func (entries) Read(name string) (string, schema.GroupVersionResource, string, bool) {
	switch name {
	case "cm":
		return "list", configMaps, "team", true
	case "one":
		return "get", configMaps, "team", true
	}
	return "", schema.GroupVersionResource{}, "", false
}

func (entries) Notify(func(string)) {}

// TestReaderReadsEntriesAsTheAccount: the entries read are recorded, and
// an entry read from the API server (a kubernetesResource entry, an
// apiCall's urlPath) is read only if the account may make that read.
func TestReaderReadsEntriesAsTheAccount(t *testing.T) {
	denied := errors.New("denied")
	may := func(_ context.Context, verb string, gvr schema.GroupVersionResource, namespace string) error {
		if verb == "list" && gvr == configMaps && namespace == "team" {
			return denied
		}
		return nil
	}
	r := New(Config{GlobalContext: entries{"cm": 1, "api": 2, "one": 3}}).Reader(Sync{May: may})
	gc := r.globalContext()
	ctx := context.Background()
	if v, ok, err := gc.Get(ctx, "api", ""); v != 2 || !ok || err != nil {
		t.Errorf("api: %v %v %v", v, ok, err)
	}
	if _, _, err := gc.Get(ctx, "cm", ""); !errors.Is(err, denied) {
		t.Errorf("cm: %v, want denied", err)
	}
	if v, _, err := gc.Get(ctx, "one", ""); v != 3 || err != nil {
		t.Errorf("one, a get the account may make: %v %v", v, err)
	}
	if got := r.Entries(); got.Len() != 3 || !got.Has("cm") || !got.Has("api") {
		t.Errorf("entries read %v", got.UnsortedList())
	}
	if New(Config{}).Reader(Sync{}).globalContext() != nil || New(Config{}).Reader(Sync{}).Entries() != nil {
		t.Error("no store: entries served")
	}
}

// TestReaderHidesTheProofKey: the Secret that holds Sprout's proof key is
// never read by a policy, by Get or in a List of its namespace; the other
// Secrets are, and a ConfigMap of the same name is.
func TestReaderHidesTheProofKey(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	secret := func(namespace, name string) *unstructured.Unstructured {
		u := configMap(namespace, name, nil)
		u.SetKind("Secret")
		return u
	}
	caches := &fakeCaches{stores: map[schema.GroupVersionResource]cache.Store{
		secrets:    cached(t, secret("sprout", "sprout-proof-key"), secret("sprout", "other")),
		configMaps: cached(t, configMap("sprout", "sprout-proof-key", nil)),
	}}
	proof, err := cluster.NewProofKey(make([]byte, cluster.MinProofKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	proof.KeptIn("sprout", "sprout-proof-key")
	r := New(Config{Cache: caches.cache, Proof: proof}).Reader(Sync{})
	ctx := context.Background()
	if _, err := r.Get(ctx, secrets, "sprout", "sprout-proof-key"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of the key's Secret: %v, want NotFound", err)
	}
	list, err := r.List(ctx, secrets, "sprout", labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if items := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["metadata"].(map[string]any)["name"] != "other" {
		t.Errorf("List of the key's namespace: %v, want the other Secret alone", items)
	}
	if _, err := r.Get(ctx, configMaps, "sprout", "sprout-proof-key"); err != nil {
		t.Errorf("Get of a ConfigMap named as the key's Secret: %v", err)
	}
}
