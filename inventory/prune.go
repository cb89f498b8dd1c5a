package inventory

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reasonReplaced marks objects not pruned because they changed since the
// version the decision to prune was made on.
const reasonReplaced = "changed since it was read"

// Prune deletes the objects and returns one change per object. Each delete
// is conditional on the object's UID and, when the object carries one, its
// resourceVersion: the decision to prune was made on that version, most
// often a cached one, and an object written since (taken over by another
// trigger, edited, recreated under the same name) is left alone. Its
// change reaches the caches as an event, which syncs its policy again with
// the object as it is now. One already gone counts as deleted. As for
// Apply, an API server that cannot serve fails the objects not yet tried.
func (a *Applier) Prune(ctx context.Context, objects []*unstructured.Unstructured) (ChangeSet, error) {
	var cs ChangeSet
	var errs []error
	for i, obj := range objects {
		pre := client.Preconditions{}
		if uid := obj.GetUID(); uid != "" {
			pre.UID = &uid
		}
		if rv := obj.GetResourceVersion(); rv != "" {
			pre.ResourceVersion = &rv
		}
		err := a.client.Delete(ctx, obj, pre,
			client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case err == nil || apierrors.IsNotFound(err):
			cs.add(obj, Deleted, "")
		case apierrors.IsConflict(err):
			cs.add(obj, Skipped, reasonReplaced)
		default:
			cs.add(obj, Failed, err.Error())
			errs = append(errs, fmt.Errorf("%s: delete: %w", ObjectID(obj), err))
		}
		if err != nil && unavailable(err) {
			cs.failAll(objects[i+1:], "not tried: "+err.Error())
			break
		}
	}
	return cs, errors.Join(errs...)
}
