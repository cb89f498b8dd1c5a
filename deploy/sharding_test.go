package deploy_test

import (
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestShardingOverlays: deploy/sharding renders the base installation,
// whose Deployment alone changes, to run the policies without a shard key,
// and beside it a Deployment and a metrics Service per shard: each
// Deployment with its own selector of policies and of pods, under leader
// election, as the shared account; each Service labelled for the
// ServiceMonitor, selecting its shard's pods.
func TestShardingOverlays(t *testing.T) {
	key := func(o *unstructured.Unstructured) string { return o.GetKind() + "/" + o.GetName() }
	base := map[string]*unstructured.Unstructured{}
	for _, o := range buildAt(t, ".") {
		base[key(o)] = o
	}
	selectors := map[string]string{
		"sprout":        "--watch-label-selector=!sharding.fluxcd.io/key",
		"sprout-shard1": "--watch-label-selector=sharding.fluxcd.io/key=shard1",
		"sprout-shard2": "--watch-label-selector=sharding.fluxcd.io/key=shard2",
	}
	pods := map[string]string{} // Deployment name by the pods it selects
	var services []*unstructured.Unstructured
	for _, o := range buildAt(t, "sharding") {
		if o.GetKind() == "Service" {
			services = append(services, o)
		}
		if o.GetKind() != "Deployment" {
			if b, ok := base[key(o)]; ok && !reflect.DeepEqual(b.Object, o.Object) {
				t.Errorf("deploy/sharding changes the base's %s", key(o))
			} else if !ok && o.GetKind() != "Service" {
				t.Errorf("deploy/sharding adds %s", key(o))
			}
			continue
		}
		want, ok := selectors[o.GetName()]
		if !ok {
			t.Errorf("unexpected Deployment %s", o.GetName())
			continue
		}
		delete(selectors, o.GetName())
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		if !slices.Contains(args, want) || !slices.Contains(args, "--leader-elect") {
			t.Errorf("Deployment %s runs %v, want %s under leader election", o.GetName(), args, want)
		}
		selected, _, _ := unstructured.NestedString(o.Object, "spec", "selector", "matchLabels", "app.kubernetes.io/name")
		labelled, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "labels", "app.kubernetes.io/name")
		if selected != labelled || pods[selected] != "" {
			t.Errorf("Deployment %s selects the pods %q, its own are %q, and %q selects them too", o.GetName(), selected, labelled, pods[selected])
		}
		pods[selected] = o.GetName()
		if account, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName"); account != "sprout" {
			t.Errorf("Deployment %s runs as %q, want the shared account sprout", o.GetName(), account)
		}
	}
	for name := range selectors {
		t.Errorf("no Deployment %s", name)
	}
	if len(services) != 3 {
		t.Errorf("%d metrics Services, want one per Deployment", len(services))
	}
	for _, s := range services {
		selected, _, _ := unstructured.NestedString(s.Object, "spec", "selector", "app.kubernetes.io/name")
		if pods[selected] == "" || s.GetLabels()["app.kubernetes.io/name"] != "sprout" {
			t.Errorf("Service %s selects the pods %q (no Deployment's) or lacks the ServiceMonitor's label: %v", s.GetName(), selected, s.GetLabels())
		}
	}
}
