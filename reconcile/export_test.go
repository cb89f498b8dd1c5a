package reconcile

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// OpenWatch opens a watch of gvr as the informers do, asking for
// protobuf or not, and tells which the stream is read as ("JSON" or
// "protobuf"). Each object's JSON, as the cache's form is given it, goes
// to seen. For the package's tests, which share a control plane.
func OpenWatch(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, opts metav1.ListOptions, protobuf bool, seen func(raw []byte)) (watch.Decoder, string, error) {
	raw, err := newRawClient(cfg)
	if err != nil {
		return nil, "", err
	}
	fromJSON := func(b []byte) (runtime.Object, error) {
		seen(b)
		return triggerForm.fromJSON(b)
	}
	d, err := openWatch(ctx, raw, watchKey{gvr: gvr}, opts, protobuf, objectForm{fromJSON: fromJSON, fromTyped: viaJSON(fromJSON)})
	switch d.(type) {
	case nil:
		return nil, "", err
	case *eventDecoder:
		return d, "JSON", nil
	case *protobufEventDecoder:
		return d, "protobuf", nil
	}
	return d, fmt.Sprintf("%T", d), nil
}

// AccessReviews counts the access reviews the controller asked of the API
// server.
func (c *Controller) AccessReviews() int64 { return c.access.reviews.Load() }
