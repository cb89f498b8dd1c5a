package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestProtobufWatchMakesWhatTheJSONWatchMakes: a protobuf watch of a
// built-in resource hands the cache's form the objects a JSON watch hands
// it, as JSON, field for field, managed fields included (the cache reads
// them); a resource the API server has no protobuf for (a custom resource)
// is watched in JSON when protobuf is asked for.
func TestProtobufWatchMakesWhatTheJSONWatchMakes(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, "protowatch", map[string]string{"color": "red", "sprout.dev/test": "protowatch"})
	immutable := true
	for i, cm := range []*corev1.ConfigMap{
		{Data: map[string]string{"a": "1", "html": "<b>&</b>", "empty": ""}},
		{BinaryData: map[string][]byte{"bin": {0, 1, 2, 255}}, Immutable: &immutable},
		{},
	} {
		cm.Name, cm.Namespace = fmt.Sprintf("cm-%d", i), "protowatch"
		cm.Labels = map[string]string{"sprout.dev/test": "protowatch", "n": fmt.Sprint(i)}
		cm.Annotations = map[string]string{"sprout.dev/policy": "GeneratingPolicy/x", "note": "ünïcode"}
		if _, err := kube.CoreV1().ConfigMaps("protowatch").Create(ctx, cm, metav1.CreateOptions{FieldManager: "protowatch-test"}); err != nil {
			t.Fatal(err)
		}
	}
	// initial lists what a watch-list of gvr sends before its end, by
	// namespace/name, each as the JSON its form was given.
	initial := func(gvr schema.GroupVersionResource, protobuf bool) (map[string]map[string]any, string) {
		t.Helper()
		sent := map[string]map[string]any{}
		seen := func(raw []byte) {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Errorf("%s: %v", raw, err)
			}
			md, _ := m["metadata"].(map[string]any)
			sent[fmt.Sprint(md["namespace"], "/", md["name"])] = m
		}
		yes := true
		opts := metav1.ListOptions{LabelSelector: "sprout.dev/test=protowatch", SendInitialEvents: &yes,
			AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
		d, read, err := reconcile.OpenWatch(ctx, cfg, gvr, opts, protobuf, seen)
		if err != nil {
			t.Fatalf("%s: %v", gvr.Resource, err)
		}
		defer d.Close()
		for {
			typ, obj, err := d.Decode()
			if err != nil {
				t.Fatalf("%s: %v", gvr.Resource, err)
			}
			if typ == watch.Bookmark {
				if m, err := meta.Accessor(obj); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					return sent, read
				}
			}
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "namespaces"},
	} {
		fromJSON, read := initial(gvr, false)
		if read != "JSON" {
			t.Errorf("%s asked in JSON: read as %s", gvr.Resource, read)
		}
		fromProtobuf, read := initial(gvr, true)
		if read != "protobuf" {
			t.Errorf("%s asked in protobuf: read as %s", gvr.Resource, read)
		}
		if len(fromJSON) == 0 {
			t.Fatalf("%s: the JSON watch listed nothing", gvr.Resource)
		}
		for key, want := range fromJSON {
			if got := fromProtobuf[key]; !equality.Semantic.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("%s %s from protobuf:\n%s\nfrom JSON:\n%s", gvr.Resource, key, g, w)
			}
		}
		if len(fromProtobuf) != len(fromJSON) {
			t.Errorf("%s: %d objects from protobuf, %d from JSON", gvr.Resource, len(fromProtobuf), len(fromJSON))
		}
	}

	// A custom resource has no protobuf: its stream is JSON, and read so.
	if _, read := initial(sproutv1alpha1.PolicyInventories, true); read != "JSON" {
		t.Errorf("a custom resource asked in protobuf: read as %s", read)
	}
}
