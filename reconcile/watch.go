package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	sigsjson "sigs.k8s.io/json"

	"github.com/sprout-gitops/sprout/inventory"
)

// newUnstructuredInformer makes an informer on gvr in every namespace, as
// the dynamic informer does, whose watch decodes each event in one pass
// (see eventDecoder); with cached, into inventory.Cached
// (newCachedEventDecoder), which its transform must also make of what a list
// returns.
func newUnstructuredInformer(dyn dynamic.Interface, raw rest.Interface, gvr schema.GroupVersionResource, indexers cache.Indexers, tweak func(*metav1.ListOptions), cached bool) cache.SharedIndexInformer {
	decoder := func(body io.ReadCloser) watch.Decoder { return newEventDecoder(body) }
	var example runtime.Object = &unstructured.Unstructured{}
	if cached {
		// No example: a list gives unstructured objects, a watch Cached ones.
		decoder, example = func(body io.ReadCloser) watch.Decoder { return newCachedEventDecoder(body) }, nil
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&o)
			}
			return dyn.Resource(gvr).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&o)
			}
			return watchUnstructured(ctx, raw, gvr, o, decoder)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(lw, example,
		cache.SharedIndexInformerOptions{Indexers: indexers, ObjectDescription: gvr.String()})
}

// newRawClient returns a REST client for absolute paths, whose answers
// its callers decode themselves.
func newRawClient(cfg *rest.Config) (rest.Interface, error) {
	rc := rest.CopyConfig(cfg)
	rc.APIPath, rc.GroupVersion = "/", &schema.GroupVersion{}
	rc.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(rc)
}

// watchUnstructured watches gvr in every namespace, with the options the
// reflector gives (the initial events of a watch-list included), decoding
// the stream with decoder.
func watchUnstructured(ctx context.Context, raw rest.Interface, gvr schema.GroupVersionResource, o metav1.ListOptions, decoder func(io.ReadCloser) watch.Decoder) (watch.Interface, error) {
	o.Watch = true
	prefix := "/apis/" + gvr.Group + "/" + gvr.Version
	if gvr.Group == "" {
		prefix = "/api/" + gvr.Version
	}
	body, err := raw.Get().AbsPath(prefix).Resource(gvr.Resource).
		SpecificallyVersionedParams(&o, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		SetHeader("Accept", "application/json").
		Stream(ctx)
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(decoder(body),
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// eventDecoder reads a JSON watch stream into unstructured objects, each
// event in one pass. client-go's watch decoder reads each event four times
// over: the framer scans it, the serializer parses it once for its kind and
// again as a WatchEvent, and the embedded object is parsed a third time.
// That was a third of Sprout's CPU while it listed 10,000 Namespaces and
// while it watched the ConfigMaps it created (see BenchmarkWatchDecode).
// Numbers follow the unstructured convention: int64 when whole, float64
// otherwise.
type eventDecoder struct {
	body io.ReadCloser
	dec  sigsjson.Decoder
	// cached: objects become inventory.Cached (newCachedEventDecoder).
	cached bool
}

var _ watch.Decoder = (*eventDecoder)(nil)

func newEventDecoder(body io.ReadCloser) *eventDecoder {
	return &eventDecoder{body: body, dec: sigsjson.NewDecoderCaseSensitivePreserveInts(body)}
}

// watchEvent is metav1.WatchEvent with its object decoded in place.
type watchEvent struct {
	Type   watch.EventType `json:"type"`
	Object map[string]any  `json:"object"`
}

// Decode returns the next event. An ERROR event's object is a Status as
// an unstructured object, which apierrors.FromObject reads.
func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	if d.cached {
		return d.decodeCached()
	}
	var ev watchEvent
	if err := d.dec.Decode(&ev); err != nil {
		return "", nil, err
	}
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted, watch.Error, watch.Bookmark:
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %v", ev.Type)
	}
	if ev.Object == nil {
		return "", nil, fmt.Errorf("watch event %s has no object", ev.Type)
	}
	return ev.Type, &unstructured.Unstructured{Object: ev.Object}, nil
}

// Close closes the stream, which ends a Decode under way.
func (d *eventDecoder) Close() { _ = d.body.Close() }

// newCachedEventDecoder returns an eventDecoder for a watch of Sprout's
// objects, which reads them into inventory.Cached without decoding them
// into maps (inventory.CachedFromJSON): a downstream informer keeps nothing
// else. Bookmarks and errors, which the reflector reads as metadata or a
// Status, are decoded as for any watch.
func newCachedEventDecoder(body io.ReadCloser) *eventDecoder {
	d := newEventDecoder(body)
	d.cached = true
	return d
}

// rawWatchEvent is metav1.WatchEvent with its object as it was sent.
type rawWatchEvent struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// decodeCached returns the next event of a watch of Sprout's objects.
func (d *eventDecoder) decodeCached() (watch.EventType, runtime.Object, error) {
	var ev rawWatchEvent
	if err := d.dec.Decode(&ev); err != nil {
		return "", nil, err
	}
	if len(ev.Object) == 0 || string(ev.Object) == "null" {
		return "", nil, fmt.Errorf("watch event %s has no object", ev.Type)
	}
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		c, err := inventory.CachedFromJSON(ev.Object)
		if err != nil {
			return "", nil, fmt.Errorf("watch event %s: %w", ev.Type, err)
		}
		return ev.Type, c, nil
	case watch.Error, watch.Bookmark:
		var m map[string]any
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(ev.Object, &m); err != nil {
			return "", nil, fmt.Errorf("watch event %s: %w", ev.Type, err)
		}
		return ev.Type, &unstructured.Unstructured{Object: m}, nil
	}
	return "", nil, fmt.Errorf("got invalid watch event type: %v", ev.Type)
}
