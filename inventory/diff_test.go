package inventory

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

func obj(apiVersion, kind, namespace, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

func ids(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, ObjectID(o))
	}
	return out
}

func TestStale(t *testing.T) {
	owned := []*cluster.Object{
		toCache(obj("v1", "ConfigMap", "a", "kept", nil)),
		toCache(obj("v1", "ConfigMap", "a", "gone", nil)),
		toCache(obj("v1", "ConfigMap", "b", "kept", nil)),
		toCache(obj("networking.k8s.io/v1", "NetworkPolicy", "a", "kept", nil)),
		toCache(obj("policy/v1beta1", "PodDisruptionBudget", "a", "pdb", nil)),
		toCache(obj("v1", "ConfigMap", "a", "on-delete", map[string]string{sproutv1alpha1.LabelGeneratedOnDelete: "true"})),
	}
	desired := []*unstructured.Unstructured{
		obj("v1", "ConfigMap", "a", "kept", nil),
		obj("v1", "ConfigMap", "b", "kept", nil),
		obj("policy/v1", "PodDisruptionBudget", "a", "pdb", nil), // another version, the same object
		obj("v1", "Secret", "a", "new", nil),
	}
	got := ids(cluster.Decoded(stale(owned, desired)))
	want := []string{"ConfigMap/a/gone", "NetworkPolicy/a/kept"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Stale = %v, want %v", got, want)
	}
	if got := stale(nil, desired); len(got) != 0 {
		t.Fatalf("nothing owned, nothing stale: got %v", ids(cluster.Decoded(got)))
	}
}

func TestData(t *testing.T) {
	objs := []*cluster.Object{
		toCache(obj("v1", "ConfigMap", "a", "data", map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy})),
		toCache(obj("v1", "Secret", "a", "clone", map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelSourceUID: "u1"})),
	}
	if got := ids(cluster.Decoded(Data(objs))); len(got) != 1 || got[0] != "ConfigMap/a/data" {
		t.Fatalf("Data = %v", got)
	}
}
