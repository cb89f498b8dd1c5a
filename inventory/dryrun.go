package inventory

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/sprout-gitops/sprout/cluster"
)

// The masks that replace a Secret's values in dry-run output, as Flux masks
// them: what changed shows, never what it holds.
const (
	secretMask       = "***"
	secretMaskBefore = "*** (before)"
	secretMaskAfter  = "*** (after)"
)

// DryRun answers what Apply and Prune would do, and writes nothing: an
// object that would be written is sent as a server-side dry-run apply, and
// each change carries the object as it is and as it would be.
type DryRun struct{ a *Applier }

// DryRun returns the dry-run form of the Applier.
func (a *Applier) DryRun() DryRun { return DryRun{a: a} }

// Apply returns what Applier.Apply would do to each object.
func (d DryRun) Apply(ctx context.Context, objects []*unstructured.Unstructured, live Live, opts ApplyOptions) (ChangeSet, error) {
	return d.a.each(ctx, objects, live, opts, writes{apply: d.diff, dry: true})
}

// diff asks the API server what applying obj would change: it reads the
// object and sends obj as a server-side dry-run apply, forced as Apply's
// applies are. No object means Created; labels, annotations or anything
// outside metadata and status that differ mean Configured, with the object
// as it is and as it would be; the rest is Unchanged. An object whose
// fields a create still holds (handOff) loses, in the answer, the fields
// the sync's hand-over and apply would remove (afterHandOver).
func (d DryRun) diff(ctx context.Context, obj *unstructured.Unstructured, handOff bool) (Change, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	err := d.a.client.Get(ctx, client.ObjectKeyFromObject(obj), live)
	absent := apierrors.IsNotFound(err)
	if err != nil && !absent {
		return Change{}, fmt.Errorf("%s read failed: %w", ObjectID(obj), err)
	}
	applied, err := d.a.serverApply(ctx, obj, client.DryRunAll)
	if err != nil {
		return Change{}, fmt.Errorf("%s dry-run apply failed: %w", ObjectID(obj), err)
	}
	if handOff && !absent {
		if err := afterHandOver(applied, obj); err != nil {
			return Change{}, fmt.Errorf("%s: the hand-over's fields: %w", ObjectID(obj), err)
		}
	}
	switch {
	case absent:
		ch := changeOf(obj, Created, "")
		ch.After = masked(obj.DeepCopy())
		return ch, nil
	case sameContent(live, applied):
		return changeOf(obj, Unchanged, ""), nil
	}
	ch := changeOf(obj, Configured, "")
	maskPair(live, applied)
	ch.Before, ch.After = forDiff(live), forDiff(applied)
	return ch, nil
}

// afterHandOver removes from obj, a dry-run apply's answer, the fields that
// the Update entry of Sprout's create holds and no other entry does: the
// sync hands them to its Apply entry before it applies (Applier.handOver),
// so the apply removes every one of them the desired object no longer has,
// which an apply without the hand-over leaves. The dry run cannot chain the
// two requests, so it takes them out here, reading the object without a
// schema (a list is one field). A Secret's data keys that desired sets
// through stringData stay: the API server prunes before it converts
// stringData into data.
func afterHandOver(obj, desired *unstructured.Unstructured) error {
	created, others := &fieldpath.Set{}, &fieldpath.Set{}
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil || e.Subresource != "" {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			return err
		}
		if cluster.IsCreateEntry(e) {
			created = created.Union(s)
		} else {
			others = others.Union(s)
		}
	}
	if isCoreSecret(desired) {
		stringData, _, _ := unstructured.NestedMap(desired.Object, "stringData")
		for k := range stringData {
			others.Insert(fieldpath.MakePathOrDie("data", k))
		}
	}
	// A path the create's entry holds and no other entry does goes, unless
	// another entry holds something under it: an Update entry holds every
	// map it wrote to as well as the map's members.
	drop := &fieldpath.Set{}
	created.Difference(others).Iterate(func(p fieldpath.Path) {
		if !holdsUnder(others, p) {
			drop.Insert(p.Copy())
		}
	})
	if drop.Empty() {
		return nil
	}
	tv, err := typed.DeducedParseableType.FromUnstructured(obj.Object)
	if err != nil {
		return err
	}
	left, ok := tv.RemoveItems(drop).AsValue().Unstructured().(map[string]any)
	if !ok {
		return fmt.Errorf("not an object after removing %s", drop)
	}
	obj.Object = left
	return nil
}

// isCoreSecret reports whether obj is a Secret of the core group.
func isCoreSecret(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "Secret" && obj.GroupVersionKind().Group == ""
}

// holdsUnder reports whether s holds a path below p.
func holdsUnder(s *fieldpath.Set, p fieldpath.Path) bool {
	for _, pe := range p {
		if s = s.WithPrefix(pe); s.Empty() {
			return false
		}
	}
	return true
}

// sameContent reports whether two states of an object agree in what an
// apply can change: labels, annotations, and everything outside metadata
// and status.
func sameContent(a, b *unstructured.Unstructured) bool {
	if !equality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels()) ||
		!equality.Semantic.DeepEqual(a.GetAnnotations(), b.GetAnnotations()) {
		return false
	}
	for k, v := range a.Object {
		if k != "metadata" && k != "status" && !equality.Semantic.DeepEqual(v, b.Object[k]) {
			return false
		}
	}
	for k := range b.Object {
		if _, ok := a.Object[k]; !ok && k != "metadata" && k != "status" {
			return false
		}
	}
	return true
}

// Prune returns what Applier.Prune would do: every object deleted.
func (d DryRun) Prune(_ context.Context, objects []*unstructured.Unstructured) (ChangeSet, error) {
	var cs ChangeSet
	for _, obj := range objects {
		ch := changeOf(obj, Deleted, "")
		ch.Before = forDiff(masked(obj.DeepCopy()))
		cs.Changes = append(cs.Changes, ch)
	}
	return cs, nil
}

// masked hides a Secret's values.
func masked(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if !isCoreSecret(obj) {
		return obj
	}
	for _, field := range []string{"data", "stringData"} {
		values, ok, _ := unstructured.NestedMap(obj.Object, field)
		if !ok {
			continue
		}
		for k := range values {
			values[k] = secretMask
		}
		obj.Object[field] = values
	}
	return obj
}

// maskPair hides the values of a Secret as it is (before) and as it would be
// (after): a value that changes shows as "*** (before)" and "*** (after)",
// any other as "***". The server returns a Secret's stringData as data.
func maskPair(before, after *unstructured.Unstructured) {
	if !isCoreSecret(after) {
		return
	}
	old, _, _ := unstructured.NestedMap(before.Object, "data")
	now, _, _ := unstructured.NestedMap(after.Object, "data")
	for k, v := range old {
		w, ok := now[k]
		switch {
		case ok && v != w:
			old[k], now[k] = secretMaskBefore, secretMaskAfter
		case ok:
			old[k], now[k] = secretMask, secretMask
		default:
			old[k] = secretMask
		}
	}
	for k := range now {
		if _, ok := old[k]; !ok {
			now[k] = secretMask
		}
	}
	if old != nil {
		before.Object["data"] = old
	}
	if now != nil {
		after.Object["data"] = now
	}
}

// forDiff drops the metadata that changes with every write, which a
// reader of a diff does not want to see.
func forDiff(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if obj == nil {
		return nil
	}
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	return obj
}
