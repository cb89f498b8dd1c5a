package inventory

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// TestRecordsWriteBackOverALaggingCache: a record changed, then changed
// back before its cache saw the change, is written back, spec and status;
// saved again as it was last written, it is not written. The cache is a
// store the test fills, as an informer that lags would.
func TestRecordsWriteBackOverALaggingCache(t *testing.T) {
	ctx := context.Background()
	counted := rest.CopyConfig(config(t))
	var writes atomic.Int64
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet {
				writes.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	client := dynamic.NewForConfigOrDie(config(t)).Resource(sproutv1alpha1.PolicyInventories)
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	records := NewRecords(dynamic.NewForConfigOrDie(counted), store, 0)
	ref := sproutv1alpha1.PolicyReference{Kind: "GeneratingPolicy", Name: "lagging-cache"}
	t.Cleanup(func() { _ = records.Delete(ctx, ref) })
	record := func(generated ...string) *sproutv1alpha1.PolicyInventory {
		rec := &sproutv1alpha1.PolicyInventory{}
		rec.Labels = map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy}
		rec.Spec = sproutv1alpha1.PolicyInventorySpec{Policy: ref, Source: "cluster", Generated: generated}
		return rec
	}
	objects := func(n int) func(*sproutv1alpha1.PolicyInventoryStatus) {
		return func(s *sproutv1alpha1.PolicyInventoryStatus) { s.Objects = n }
	}
	// catchUp makes the cache hold the record as the server does.
	catchUp := func() {
		t.Helper()
		u, err := client.Get(ctx, RecordName(ref), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Update(u); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	must(records.Save(ctx, record("a")))
	must(records.UpdateStatus(ctx, ref, objects(1)))
	catchUp()
	// Changed, then changed back: the cache still holds the first version.
	must(records.Save(ctx, record("a", "b")))
	must(records.UpdateStatus(ctx, ref, objects(2)))
	must(records.Save(ctx, record("a")))
	must(records.UpdateStatus(ctx, ref, objects(1)))
	u, err := client.Get(ctx, RecordName(ref), metav1.GetOptions{})
	must(err)
	rec, err := FromUnstructured(u)
	must(err)
	if !slices.Equal(rec.Spec.Generated, []string{"a"}) || rec.Status.Objects != 1 {
		t.Errorf("changed and changed back over a lagging cache, the record holds generated %v and %d objects, want [a] and 1",
			rec.Spec.Generated, rec.Status.Objects)
	}
	before := writes.Load()
	must(records.Save(ctx, record("a")))
	must(records.UpdateStatus(ctx, ref, objects(1)))
	if n := writes.Load() - before; n != 0 {
		t.Errorf("saved again as last written, the record was written %d times, want none", n)
	}
	catchUp()
	must(records.Save(ctx, record("a")))
	if n := writes.Load() - before; n != 0 {
		t.Errorf("saved again once the cache caught up, the record was written %d times, want none", n)
	}
}
