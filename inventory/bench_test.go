package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// desiredSet returns n generated ConfigMaps as a sync computes them, and a
// cache holding each as applied.
func desiredSet(n int) ([]*unstructured.Unstructured, cachedObjects) {
	objects := make([]*unstructured.Unstructured, 0, n)
	live := cachedObjects{}
	for i := range n {
		ns := fmt.Sprintf("team-%05d", i)
		o := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("zk-%05d", i), "namespace": ns},
			"data":     map[string]any{"KAFKA_ADDRESS": "192.168.10.13:9092", "ZK_ADDRESS": "192.168.10.10:2181"},
		}}
		Label(o, Origin{Policy: "GeneratingPolicy/zk", PolicyName: "zk",
			Trigger: ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: ns, UID: types.UID(fmt.Sprint("uid-", i))}})
		Stamp(o)
		cached := o.DeepCopy()
		cached.SetResourceVersion("1")
		cached.SetUID(types.UID(fmt.Sprint("cm-", i)))
		live[o.GetName()] = toCache(cached)
		objects = append(objects, o)
	}
	return objects, live
}

// BenchmarkApplyUnchanged10k measures the decision for 10,000 desired
// objects that the cache shows already applied: the whole cost of a sync's
// apply phase when nothing changed (no request is sent).
func BenchmarkApplyUnchanged10k(b *testing.B) {
	objects, live := desiredSet(10000)
	a := &Applier{} // no client: a request would panic
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		cs, err := a.Apply(ctx, objects, live, ApplyOptions{Synchronize: true})
		if err != nil || cs.Count(Unchanged) != len(objects) {
			b.Fatalf("%d unchanged of %d, error %v", cs.Count(Unchanged), len(objects), err)
		}
	}
}

// BenchmarkStale10k measures finding what to prune among 10,000 owned
// objects against 10,000 desired ones, 100 of which differ.
func BenchmarkStale10k(b *testing.B) {
	desired, live := desiredSet(10000)
	owned := make([]*cluster.Object, 0, len(live))
	for _, o := range live {
		owned = append(owned, o)
	}
	desired = desired[100:]
	b.ReportAllocs()
	for b.Loop() {
		if n := len(stale(owned, desired)); n != 100 {
			b.Fatalf("%d stale, want 100", n)
		}
	}
}

// BenchmarkStampApplied measures the digest of what is applied, computed
// for every desired object on every sync.
func BenchmarkStampApplied(b *testing.B) {
	objects, _ := desiredSet(1)
	b.ReportAllocs()
	for b.Loop() {
		Stamp(objects[0])
	}
}

// BenchmarkApplyUnchangedRemembered10k is BenchmarkApplyUnchanged10k with
// the Decisions of the sync before: each object costs a cache lookup.
func BenchmarkApplyUnchangedRemembered10k(b *testing.B) {
	objects, live := desiredSet(10000)
	memo := NewDecisions()
	opts := ApplyOptions{Synchronize: true}
	if _, err := applyRound(memo, objects, live, opts, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		cs, err := applyRound(memo, objects, live, opts, nil)
		if err != nil || cs.Count(Unchanged) != len(objects) {
			b.Fatalf("%d unchanged of %d, error %v", cs.Count(Unchanged), len(objects), err)
		}
	}
}

// BenchmarkStaleRemembered10k measures the prune diff after an apply that
// found 10,000 objects unchanged, with 100 more owned ones not desired.
func BenchmarkStaleRemembered10k(b *testing.B) {
	desired, live := desiredSet(10100)
	owned := make([]*cluster.Object, 0, len(live))
	for _, o := range live {
		owned = append(owned, o)
	}
	desired = desired[100:]
	memo := NewDecisions()
	if _, err := applyRound(memo, desired, live, ApplyOptions{Synchronize: true}, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(memo.Stale(owned)); n != 100 {
			b.Fatalf("%d stale, want 100", n)
		}
	}
}

// BenchmarkCreatedAsDesired measures the reading of a create's answer: the
// object as the API server made it, with its managed fields; a protobuf
// one compared with the body sent, and without it, read as JSON.
func BenchmarkCreatedAsDesired(b *testing.B) {
	objects, _ := desiredSet(1)
	answer := createAnswer(b, objects[0])
	sent, _, err := createBody(objects[0])
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		answer, sent []byte
	}{
		{"json", answer, nil},
		{"protobuf", protobufAnswer(b, answer), sent},
		{"protobuf-unsent", protobufAnswer(b, answer), nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if createdAsDesired(tc.answer, tc.sent, objects[0]) == "" {
					b.Fatal("not created as desired")
				}
			}
		})
	}
}

// createAnswer is what the API server answers to the create of desired:
// desired with an identity, a version and the managed fields of the create.
func createAnswer(t testing.TB, desired *unstructured.Unstructured) []byte {
	t.Helper()
	return createAnswerOf(t, desired, "42")
}

// createAnswerOf is createAnswer with the version given.
func createAnswerOf(t testing.TB, desired *unstructured.Unstructured, version string) []byte {
	t.Helper()
	made := desired.DeepCopy()
	made.SetUID("0b5e3e2a-6a52-4b6f-8a38-7a3c7d1e9f10")
	made.SetResourceVersion(version)
	now := metav1.Now()
	made.SetCreationTimestamp(now)
	fields := map[string]any{}
	for _, m := range []string{"labels", "annotations"} {
		set := map[string]any{}
		for k := range metadataStrings(desired, m) {
			set["f:"+k] = map[string]any{}
		}
		fields["f:"+m] = set
	}
	data := map[string]any{}
	for k := range desired.Object["data"].(map[string]any) {
		data["f:"+k] = map[string]any{}
	}
	raw, err := json.Marshal(map[string]any{"f:data": data, "f:metadata": fields})
	if err != nil {
		t.Fatal(err)
	}
	made.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: sproutv1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fieldsOf(raw), Time: &now}})
	answer, err := json.Marshal(made.Object)
	if err != nil {
		t.Fatal(err)
	}
	return answer
}

// BenchmarkCreateBody measures the encoding of a generated ConfigMap for
// its create: as protobuf, with the checks that it converts exactly
// (createBody), and as JSON.
func BenchmarkCreateBody(b *testing.B) {
	objects, _ := desiredSet(1)
	b.Run("createBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, contentType, err := createBody(objects[0]); err != nil || contentType != runtime.ContentTypeProtobuf {
				b.Fatal(contentType, err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(objects[0].Object); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func fieldsOf(raw []byte) *metav1.FieldsV1 {
	f := &metav1.FieldsV1{}
	f.SetRawBytes(raw)
	return f
}
