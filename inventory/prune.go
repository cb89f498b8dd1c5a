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

// reasonReplaced marks objects not pruned because they changed hands.
const reasonReplaced = "replaced since it was read"

// Prune deletes the objects and returns one change per object. Each delete
// is conditional on the object's UID, so an object someone recreated under
// the same name since it was read is left alone; one already gone counts as
// deleted. As for Apply, an API server that cannot serve fails the objects
// not yet tried.
func (a *Applier) Prune(ctx context.Context, objects []*unstructured.Unstructured) (ChangeSet, error) {
	var cs ChangeSet
	var errs []error
	for i, obj := range objects {
		uid := obj.GetUID()
		err := a.client.Delete(ctx, obj,
			client.Preconditions{UID: &uid},
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
