package inventory

import (
	"context"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// secretMask replaces every value of a Secret in dry-run output, as Flux
// masks them: what changed shows, never what it holds.
const secretMask = "***"

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

// diff asks the API server what applying obj would change.
func (d DryRun) diff(ctx context.Context, obj *unstructured.Unstructured, _ bool) (Change, error) {
	entry, before, after, err := d.a.manager.Diff(ctx, obj.DeepCopy(), ssa.DefaultDiffOptions())
	if err != nil {
		return Change{}, err
	}
	ch := changeOf(obj, actionOf(entry.Action), "")
	switch ch.Action {
	case Created:
		ch.After = masked(obj.DeepCopy())
	case Configured:
		ch.Before, ch.After = forDiff(before), forDiff(after)
	}
	return ch, nil
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
	if obj.GetKind() != "Secret" || obj.GroupVersionKind().Group != "" {
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
