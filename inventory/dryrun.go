package inventory

import (
	"bytes"
	"context"
	"fmt"

	ssajsondiff "github.com/fluxcd/pkg/ssa/jsondiff"
	ssanormalize "github.com/fluxcd/pkg/ssa/normalize"
	"github.com/wI2L/jsondiff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/sprout-gitops/sprout/cluster"
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
// applies are. No object means Created, with the object as the API server
// would create it; a drift (below) means Configured, with the object as it
// is and as it would be; the rest is Unchanged. An object whose fields a
// create still holds (handOff) loses, in the answer, the fields the sync's
// hand-over and apply would remove (afterHandOver). A Secret's values are
// masked as Flux masks them.
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
	var ch Change
	switch {
	case absent:
		ch = changeOf(obj, Created, "")
		ch.After = forDiff(applied)
	case handOff:
		if err := afterHandOver(applied, obj); err != nil {
			return Change{}, fmt.Errorf("%s: the hand-over's fields: %w", ObjectID(obj), err)
		}
		fallthrough
	default:
		patch, err := drift(live, applied)
		if err != nil {
			return Change{}, fmt.Errorf("%s: comparing the dry run with the object: %w", ObjectID(obj), err)
		}
		if len(patch) == 0 {
			return changeOf(obj, Unchanged, ""), nil
		}
		ch = changeOf(obj, Configured, "")
		ch.Before, ch.After = forDiff(live), forDiff(applied)
	}
	maskSecret(obj, &ch)
	return ch, nil
}

// drift returns what applying would change in live, as the JSON patch from
// live to applied (a dry run's answer), compared as Flux compares them:
// labels, annotations and everything outside metadata and status, after
// ssa's normalisation of dry-run answers. Unlike Flux's, a label or
// annotation the apply removes counts: Sprout's apply owns the ones it
// removes.
func drift(live, applied *unstructured.Unstructured) (jsondiff.Patch, error) {
	for _, o := range []*unstructured.Unstructured{live, applied} {
		if err := ssanormalize.DryRunUnstructured(o); err != nil {
			return nil, err
		}
	}
	patch, err := jsondiff.Compare(labelsAndAnnotations(live), labelsAndAnnotations(applied))
	if err != nil {
		return nil, err
	}
	rest, err := ssajsondiff.DiffUnstructured(live, applied)
	return append(patch, rest...), err
}

// labelsAndAnnotations returns obj's metadata as far as drift compares it.
func labelsAndAnnotations(obj *unstructured.Unstructured) map[string]any {
	meta := map[string]any{}
	if l := obj.GetLabels(); len(l) > 0 {
		meta["labels"] = l
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		meta["annotations"] = a
	}
	return map[string]any{"metadata": meta}
}

// The masks that replace a Secret's values in dry-run output.
const (
	secretMask       = "***"
	secretMaskBefore = "*** (before)"
	secretMaskAfter  = "*** (after)"
)

// maskSecret hides the values of a Secret in ch (either side may be nil)
// as Flux's ssa.SanitizeUnstructuredData does: a value that changes shows
// as "*** (before)" and "*** (after)", any other as "***". It is Flux's
// function written again: the root ssa package links kubectl and
// cli-runtime, which cost the controller more resident memory than the
// rest of ssa (docs/decisions.md). A Secret a dry run shows is the API
// server's, which keeps no stringData.
func maskSecret(obj *unstructured.Unstructured, ch *Change) {
	if !isCoreSecret(obj) {
		return
	}
	var before, after map[string]any
	if ch.Before != nil {
		before, _, _ = unstructured.NestedMap(ch.Before.Object, "data")
	}
	if ch.After != nil {
		after, _, _ = unstructured.NestedMap(ch.After.Object, "data")
	}
	for k, v := range before {
		w, ok := after[k]
		switch {
		case ok && v != w:
			before[k], after[k] = secretMaskBefore, secretMaskAfter
		case ok:
			before[k], after[k] = secretMask, secretMask
		default:
			before[k] = secretMask
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			after[k] = secretMask
		}
	}
	if before != nil {
		ch.Before.Object["data"] = before
	}
	if after != nil {
		ch.After.Object["data"] = after
	}
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

// Prune returns what Applier.Prune would do: every object deleted.
func (d DryRun) Prune(_ context.Context, objects []*unstructured.Unstructured) (ChangeSet, error) {
	var cs ChangeSet
	for _, obj := range objects {
		ch := changeOf(obj, Deleted, "")
		ch.Before = forDiff(obj.DeepCopy())
		maskSecret(obj, &ch)
		cs.Changes = append(cs.Changes, ch)
	}
	return cs, nil
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
