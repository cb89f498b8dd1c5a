package main

import (
	"maps"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	sproutcluster "github.com/sprout-gitops/sprout/cluster"
)

// TestSproutObjectIsTheFixturesExpectedOutput checks that the raw writes'
// object is what the benchmark policy's fixture says sprout generates, so
// that (a) and (b) write what sprout writes. The bench checks the same
// against a live object after each cold run.
func TestSproutObjectIsTheFixturesExpectedOutput(t *testing.T) {
	raw, err := os.ReadFile("../../../fixtures/zk-kafka-address/expected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &want.Object); err != nil {
		t.Fatal(err)
	}
	got := sproutObject("zk-kafka-address", want.GetNamespace(), "")
	if !maps.Equal(got.GetLabels(), want.GetLabels()) {
		t.Errorf("labels:\n got %v\nwant %v", got.GetLabels(), want.GetLabels())
	}
	annotations := got.GetAnnotations()
	if annotations[sproutv1alpha1.AnnotationApplied] == "" {
		t.Errorf("no %s stamp in %v", sproutv1alpha1.AnnotationApplied, annotations)
	}
	delete(annotations, sproutv1alpha1.AnnotationApplied)
	// Signed as the controller signs; render, whose output the fixture
	// holds, has no key.
	if annotations[sproutcluster.AnnotationProof] == "" {
		t.Errorf("no %s in %v", sproutcluster.AnnotationProof, annotations)
	}
	delete(annotations, sproutcluster.AnnotationProof)
	if !maps.Equal(annotations, want.GetAnnotations()) {
		t.Errorf("annotations:\n got %v\nwant %v", annotations, want.GetAnnotations())
	}
	gotData, _, _ := unstructured.NestedStringMap(got.Object, "data")
	wantData, _, _ := unstructured.NestedStringMap(want.Object, "data")
	if !maps.Equal(gotData, wantData) || got.GetName() != want.GetName() {
		t.Errorf("object %s data %v, want %s data %v", got.GetName(), gotData, want.GetName(), wantData)
	}
}
