package inventory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

func TestUnavailable(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"connection refused, wrapped", fmt.Errorf("read: %w", refused), true},
		{"context canceled", fmt.Errorf("apply: %w", context.Canceled), true},
		{"502 from a load balancer", apierrors.NewGenericServerResponse(502, "GET", cm, "a", "", 0, true), true},
		{"503", apierrors.NewServiceUnavailable("shutting down"), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"invalid object", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "a", nil), false},
		{"forbidden", apierrors.NewForbidden(cm, "a", errors.New("no")), false},
		{"internal error, a webhook of one object", apierrors.NewInternalError(errors.New("webhook")), false},
		{"not found", apierrors.NewNotFound(cm, "a"), false},
		{"a local error", errors.New("cannot marshal"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unavailable(tt.err); got != tt.want {
				t.Errorf("unavailable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestApplyStopsWhenTheServerCannotServe: an error of one object fails it
// alone; an unavailable API server fails the objects not yet started
// without a request each.
func TestApplyStopsWhenTheServerCannotServe(t *testing.T) {
	objects, live := drifted(3 * applyParallelism)
	for _, tt := range []struct {
		name     string
		err      error
		maxTries int
	}{
		{"invalid object", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "o", nil), len(objects)},
		{"service unavailable", apierrors.NewServiceUnavailable("down"), applyParallelism},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var tries atomic.Int64
			write := func(context.Context, *unstructured.Unstructured, bool) (Change, error) {
				tries.Add(1)
				return Change{}, tt.err
			}
			cs, err := (&Applier{}).each(context.Background(), objects, live, ApplyOptions{Synchronize: true}, writes{apply: write})
			if n := int(tries.Load()); err == nil || n == 0 || n > tt.maxTries || tt.maxTries == len(objects) && n != len(objects) {
				t.Errorf("%d writes tried (error %v), want at most %d", n, err, tt.maxTries)
			}
			if n := cs.Count(Failed); n != len(objects) {
				t.Errorf("%d objects failed, want every one of %d: %+v", n, len(objects), cs.Changes)
			}
		})
	}
}

// drifted returns n ConfigMaps of Sprout's, and a cache in which each
// lacks a desired field: each must be written.
func drifted(n int) ([]*unstructured.Unstructured, cachedObjects) {
	var objects []*unstructured.Unstructured
	live := cachedObjects{}
	for i := range n {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("ConfigMap")
		o.SetNamespace("ns")
		o.SetName(fmt.Sprintf("o-%d", i))
		o.SetLabels(map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy, sproutv1alpha1.LabelPolicyName: "p", sproutv1alpha1.LabelTriggerUID: "t"})
		live[o.GetName()] = toCache(o)
		_ = unstructured.SetNestedField(o.Object, "new", "data", "k")
		objects = append(objects, o)
	}
	return objects, live
}

// cachedObjects serves Live from a map by name.
type cachedObjects map[string]*cluster.Object

func (c cachedObjects) Get(_ schema.GroupVersionKind, _, name string) (*cluster.Object, bool) {
	o, ok := c[name]
	return o, ok
}

// Seen treats every version as seen: an object created and not in the map
// has been deleted.
func (c cachedObjects) Seen(schema.GroupVersionKind, string) bool { return true }

// toCache returns obj as a cache holds it, leaving obj as it is. Unless
// obj says who wrote it (its managed fields), it is as a create of
// Sprout's left it: labelled managed-by, which the caches select, and with
// the create's entry holding its origin.
func toCache(obj *unstructured.Unstructured) *cluster.Object {
	obj = obj.DeepCopy()
	if len(obj.GetManagedFields()) == 0 {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		if labels[sproutv1alpha1.LabelManagedBy] == "" {
			labels[sproutv1alpha1.LabelManagedBy] = sproutv1alpha1.ManagedBy
		}
		obj.SetLabels(labels)
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{originEntry(sproutv1alpha1.FieldManager)})
	}
	c, err := generatedForm.FromList(obj)
	if err != nil {
		panic(err)
	}
	return c
}

// edited returns c's object changed by edit, as the cache holds it after
// the edit: another copy.
func edited(c *cluster.Object, edit func(*unstructured.Unstructured)) *cluster.Object {
	obj := c.Decode()
	edit(obj)
	return toCache(obj)
}

// TestApplyFinishesTheObjectsUnderWay: when the sync's context ends during
// writes, those writes complete with a live context and no other object is
// started.
func TestApplyFinishesTheObjectsUnderWay(t *testing.T) {
	objects, live := drifted(3 * applyParallelism)
	ctx, stopSync := context.WithCancel(context.Background())
	full, stopped := make(chan struct{}), make(chan struct{})
	var tried, cancelled atomic.Int64
	write := func(wctx context.Context, obj *unstructured.Unstructured, _ bool) (Change, error) {
		if tried.Add(1) == applyParallelism {
			close(full)
		}
		if obj.GetName() == "o-0" {
			<-full
			stopSync() // SIGTERM while as many writes as may be are under way
			close(stopped)
		}
		<-stopped
		if err := wctx.Err(); err != nil {
			cancelled.Add(1)
			return Change{}, err
		}
		return changeOf(obj, Configured, ""), nil
	}
	cs, err := (&Applier{}).each(ctx, objects, live, ApplyOptions{Synchronize: true}, writes{apply: write})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if n := tried.Load(); n != applyParallelism || cancelled.Load() != 0 {
		t.Errorf("%d writes tried, %d of them cancelled: want the %d under way, finished", n, cancelled.Load(), applyParallelism)
	}
	if n := cs.Count(Configured); n != applyParallelism || cs.Count(Failed) != len(objects)-applyParallelism {
		t.Errorf("%d configured, %d failed: want %d and %d", n, cs.Count(Failed), applyParallelism, len(objects)-applyParallelism)
	}
}

// TestApplyRunsItsLastRequestItself: an apply's last request runs on the
// goroutine that called it, so a round that writes one object starts no
// worker, and one that writes n starts at most n-1.
func TestApplyRunsItsLastRequestItself(t *testing.T) {
	for _, n := range []int{1, 3} {
		objects, live := drifted(n)
		var written atomic.Int64
		write := func(_ context.Context, obj *unstructured.Unstructured, _ bool) (Change, error) {
			written.Add(1)
			return changeOf(obj, Configured, ""), nil
		}
		round := NewDecisions().Begin()
		cs, err := (&Applier{}).each(context.Background(), objects, live, ApplyOptions{Synchronize: true, Round: round}, writes{apply: write})
		if err != nil || cs.Count(Configured) != n || written.Load() != int64(n) {
			t.Fatalf("%d objects: %d configured, %d written, error %v", n, cs.Count(Configured), written.Load(), err)
		}
		if started := round.requests.Started(); started > int64(n-1) {
			t.Errorf("%d objects written: %d workers started, want at most %d", n, started, n-1)
		}
		round.End()
	}
}

// originEntry is an Update entry of manager holding every label and
// annotation that may name an object's origin, as a create leaves it.
func originEntry(manager string) metav1.ManagedFieldsEntry {
	f := &metav1.FieldsV1{}
	f.SetRawBytes([]byte(`{"f:metadata":{"f:annotations":{".":{},"f:sprout.dev/policy":{}},"f:labels":{".":{},` +
		`"f:app.kubernetes.io/managed-by":{},"f:generate.kyverno.io/policy-name":{},"f:generate.kyverno.io/trigger-uid":{},` +
		`"f:sprout.dev/policy-namespace":{}}}}`))
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: f}
}

// generatedForm makes cached objects as the caches of Sprout's objects do,
// pairing nothing.
var generatedForm = cluster.Generated(nil)
