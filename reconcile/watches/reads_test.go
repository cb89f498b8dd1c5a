package watches

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/cluster"
)

var (
	depConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	depSecrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	depNamespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// depObject is a cached object of kind ConfigMap (Namespace when namespace
// is empty).
func depObject(t *testing.T, namespace, name string, lbls map[string]string) *cluster.Object {
	t.Helper()
	kind := "ConfigMap"
	if namespace == "" {
		kind = "Namespace"
	}
	raw, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": kind,
		"metadata": map[string]any{"namespace": namespace, "name": name, "uid": namespace + "/" + name, "labels": lbls}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := cluster.Triggers.FromJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func depList(gvr schema.GroupVersionResource, namespace string, set labels.Set) Read {
	s := labels.SelectorFromSet(set)
	return Read{gvr: gvr, namespace: namespace, selector: s, sel: s.String()}
}

func uidsOf(trs []TriggerReads) []types.UID {
	var out []types.UID
	for _, tr := range trs {
		out = append(out, tr.UID)
	}
	slices.Sort(out)
	return out
}

// TestDepsIndexCovers: a Get covers its object alone; a List, the objects
// of its namespace (every namespace for "") its selector selects before
// or after the change.
func TestDepsIndexCovers(t *testing.T) {
	key := "GeneratingPolicy/p"
	var x ReadIndex[string]
	x.Begin(key)
	x.End(key, true, true, nil, []TriggerReads{
		{UID: "a", reads: []Read{{gvr: depConfigMaps, namespace: "src", name: "c-0"}}},
		{UID: "b", reads: []Read{depList(depConfigMaps, "src", labels.Set{"pick": "1"})}},
		{UID: "c", reads: []Read{depList(depConfigMaps, "", labels.Set{"pick": "2"})}},
		{UID: "d", reads: []Read{{gvr: depNamespaces, name: "team"}}},
	})
	obj := func(namespace, name string, lbls map[string]string) *cluster.Object {
		return depObject(t, namespace, name, lbls)
	}
	for _, tt := range []struct {
		name     string
		gvr      schema.GroupVersionResource
		obj, old *cluster.Object
		want     []types.UID
	}{
		{"the object a Get read", depConfigMaps, obj("src", "c-0", nil), nil, []types.UID{"a"}},
		{"another name", depConfigMaps, obj("src", "c-9", nil), nil, nil},
		{"the name in another namespace", depConfigMaps, obj("other", "c-0", nil), nil, nil},
		{"another resource", depSecrets, obj("src", "c-0", nil), nil, nil},
		{"joins a List", depConfigMaps, obj("src", "x", map[string]string{"pick": "1"}), obj("src", "x", nil), []types.UID{"b"}},
		{"leaves a List", depConfigMaps, obj("src", "x", nil), obj("src", "x", map[string]string{"pick": "1"}), []types.UID{"b"}},
		{"moves from a List to another", depConfigMaps, obj("src", "x", map[string]string{"pick": "2"}), obj("src", "x", map[string]string{"pick": "1"}), []types.UID{"b", "c"}},
		{"a List of every namespace", depConfigMaps, obj("elsewhere", "y", map[string]string{"pick": "2"}), nil, []types.UID{"c"}},
		{"selected by no List", depConfigMaps, obj("src", "z", map[string]string{"pick": "3"}), nil, nil},
		{"a cluster-scoped Get", depNamespaces, obj("", "team", nil), nil, []types.UID{"d"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, full := x.Covered(key, ReadEvent{GVR: tt.gvr, Obj: tt.obj, Old: tt.old})
			if full || !slices.Equal(uidsOf(got), tt.want) {
				t.Errorf("covered: %v (full %v), want %v", uidsOf(got), full, tt.want)
			}
		})
	}
}

// TestDepsIndexAcrossSyncs: a policy whose reads are unknown is synced in
// full on a change; a change while a sync evaluates is looked up again
// once its reads are in, for the triggers evaluated before it; an
// incremental sync replaces the reads of its triggers alone; a sync that
// is not clean, or an evaluation past maxReadsPerTrigger, makes them
// unknown; an object too many triggers read makes the sync full.
func TestDepsIndexAcrossSyncs(t *testing.T) {
	key := "GeneratingPolicy/p"
	source := Read{gvr: depConfigMaps, namespace: "src", name: "c-0"}
	change := ReadEvent{GVR: depConfigMaps, Obj: depObject(t, "src", "c-0", nil)}
	var x ReadIndex[string]
	if _, full := x.Covered(key, change); !full {
		t.Fatal("a change before any sync did not ask for a full one")
	}

	x.Begin(key)
	if got, full := x.Covered(key, change); full || got != nil {
		t.Fatalf("a change during the first sync: %v (full %v), want it logged", uidsOf(got), full)
	}
	// a began before the change, b after it: b read c-0 as changed.
	readers, full := x.End(key, true, true, nil, []TriggerReads{
		{UID: "a", reads: []Read{source}, logged: 0},
		{UID: "b", reads: []Read{source}, logged: 1},
	})
	if full || !slices.Equal(uidsOf(readers), []types.UID{"a"}) {
		t.Errorf("after the sync: %v (full %v), want a", uidsOf(readers), full)
	}

	x.Begin(key)
	if _, full := x.End(key, true, false, []types.UID{"a"}, nil); full {
		t.Error("an incremental sync with nothing changed meanwhile asked for a full one")
	}
	if got, _ := x.Covered(key, change); !slices.Equal(uidsOf(got), []types.UID{"b"}) {
		t.Errorf("after a's reads went: %v, want b", uidsOf(got))
	}

	x.Begin(key)
	x.Covered(key, change)
	if _, full := x.End(key, false, false, nil, nil); !full {
		t.Error("a sync that was not clean, with a change meanwhile, did not ask for a full one")
	}
	if _, full := x.Covered(key, change); !full {
		t.Error("reads still known after a sync that was not clean")
	}

	x.Begin(key)
	x.End(key, true, true, nil, []TriggerReads{{UID: "a", reads: []Read{source}}, {UID: "c", untracked: true}})
	if _, full := x.Covered(key, change); !full {
		t.Error("reads still known after an evaluation past maxReadsPerTrigger")
	}

	many := make([]TriggerReads, MaxCovered+1)
	for i := range many {
		many[i] = TriggerReads{UID: types.UID(fmt.Sprint(i)), reads: []Read{source}}
	}
	x.Begin(key)
	x.End(key, true, true, nil, many)
	if _, full := x.Covered(key, change); !full {
		t.Errorf("a change %d triggers read did not ask for a full sync", len(many))
	}
}

// TestDepsTapeBound: a tape keeps each distinct read once, and at most
// maxReadsPerTrigger of them, past which the evaluation is untracked.
func TestDepsTapeBound(t *testing.T) {
	var tape Tape
	for i := range maxReadsPerTrigger {
		tape.Note(Read{gvr: depConfigMaps, namespace: "src", name: fmt.Sprint(i)})
		tape.Note(Read{gvr: depConfigMaps, namespace: "src", name: fmt.Sprint(i)})
	}
	if len(tape.reads) != maxReadsPerTrigger || tape.untracked {
		t.Fatalf("%d reads, untracked %v, want %d and tracked", len(tape.reads), tape.untracked, maxReadsPerTrigger)
	}
	tape.Note(Read{gvr: depConfigMaps, namespace: "src", name: "one-more"})
	if !tape.untracked {
		t.Error("a read past the bound left the evaluation tracked")
	}
}
