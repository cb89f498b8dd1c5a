package inventory

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// TestAdoptOnlyWhatNamesNoOtherOrigin: a synchronizing policy takes back an
// object Sprout wrote whose origin labels are gone, unless what is left of
// its labels or annotation names another policy, or another trigger that
// still exists; an object Sprout never wrote, or a policy that does not
// synchronize, leaves it as it is.
func TestAdoptOnlyWhatNamesNoOtherOrigin(t *testing.T) {
	desired := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "zk", "namespace": "team-red"},
	}}
	Label(desired, Origin{Policy: "GeneratingPolicy/zk", PolicyName: "zk",
		Trigger: ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "team-red", UID: "t1"}})
	alive := func(uid string) bool { return uid != "gone" }
	sync := ApplyOptions{Synchronize: true, Alive: alive}
	for name, tt := range map[string]struct {
		labels, annotations map[string]string
		written             bool
		opts                ApplyOptions
		adopt               bool
	}{
		"every label removed":                {nil, nil, true, sync, true},
		"managed-by removed, rest ours":      {map[string]string{sproutv1alpha1.LabelPolicyName: "zk", sproutv1alpha1.LabelTriggerUID: "t1"}, map[string]string{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/zk"}, true, sync, true},
		"managed-by changed to Helm":         {map[string]string{sproutv1alpha1.LabelManagedBy: "Helm"}, nil, true, sync, true},
		"a trigger that is gone":             {map[string]string{sproutv1alpha1.LabelTriggerUID: "gone"}, nil, true, sync, true},
		"never written by Sprout":            {nil, nil, false, sync, false},
		"not synchronizing":                  {nil, nil, true, ApplyOptions{Alive: alive}, false},
		"another policy's annotation":        {nil, map[string]string{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/other"}, true, sync, false},
		"another policy's label":             {map[string]string{sproutv1alpha1.LabelPolicyName: "other"}, nil, true, sync, false},
		"another namespace's policy":         {map[string]string{sproutv1alpha1.LabelPolicyNamespace: "team-blue"}, nil, true, sync, false},
		"another trigger that still exists":  {map[string]string{sproutv1alpha1.LabelTriggerUID: "t2"}, nil, true, sync, false},
		"another trigger, liveness unknown":  {map[string]string{sproutv1alpha1.LabelTriggerUID: "t2"}, nil, true, ApplyOptions{Synchronize: true}, false},
		"labelled as another policy's fully": {map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: "other", sproutv1alpha1.LabelTriggerUID: "t9"}, map[string]string{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/other"}, true, sync, false},
	} {
		t.Run(name, func(t *testing.T) {
			existing := &unstructured.Unstructured{}
			existing.SetLabels(tt.labels)
			existing.SetAnnotations(tt.annotations)
			d := decideOwner(desired, metadataStrings(existing, "labels"), metadataStrings(existing, "annotations"), sproutWrote{object: tt.written}, tt.opts)
			if adopted := d.action == "" && d.reclaim; adopted != tt.adopt {
				t.Errorf("adopted %v (decision %+v), want %v", adopted, d, tt.adopt)
			}
		})
	}
}
