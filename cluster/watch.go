package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/internal/wire"
)

// Resource is what one informer watches: a resource, in every namespace
// (Namespace "") or in one, the objects its label selector selects.
type Resource struct {
	GVR       schema.GroupVersionResource
	Namespace string
	// LabelSelector, when set, confines the informer to the objects it
	// selects.
	LabelSelector string
	// Protobuf asks for a protobuf watch (see protobufEvents): only a
	// built-in resource has one.
	Protobuf bool
	// Cached starts the informer from what the API server's cache holds,
	// as an informer's list did before consistent reads, rather than at
	// the newest revision. A consistent start waits until the API server's
	// cache of the resource has seen every write to any resource since
	// (up to its progress request period, 100 ms, after any other write):
	// a cache that may start a moment behind costs nothing where the
	// events after the start correct it before anything is decided on it
	// that cannot be undone (the generated objects: one missed is created
	// and found existing, one deleted meanwhile is put back on its delete).
	Cached bool
	// Listing, when set, is handed the objects of the informer's first
	// list as they come (see Listing).
	Listing *Listing
}

// NewInformer makes an informer on r, as the dynamic informer does, whose
// cache keeps Objects made in form: its watch decodes each event in one
// pass (see eventDecoder), and its transform makes the form of what a list
// returns. raw is a client made by NewRawClient.
func NewInformer(dyn dynamic.Interface, raw rest.Interface, r Resource, indexers cache.Indexers, form Form) cache.SharedIndexInformer {
	ahead := new(pageAhead)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = r.LabelSelector
			if r.Listing != nil {
				return ahead.listPage(ctx, raw, r, o, form)
			}
			return dyn.Resource(r.GVR).Namespace(r.Namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = r.LabelSelector
			if r.Cached && o.SendInitialEvents != nil && *o.SendInitialEvents && o.ResourceVersion == "" {
				o.ResourceVersion = "0"
			}
			d, err := openWatch(ctx, raw, r, o, form)
			if err != nil {
				return nil, err
			}
			return watch.NewStreamWatcher(d,
				apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
		},
	}
	var lister cache.ListerWatcher = lw
	if r.Listing != nil {
		lister = pagedLister{lw}
	}
	// No example type: a list gives unstructured objects, or Objects (a
	// Listing's pages), a watch Objects.
	inf := cache.NewSharedIndexInformerWithOptions(lister, nil,
		cache.SharedIndexInformerOptions{Indexers: indexers, ObjectDescription: r.GVR.String()})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return form.FromList(u)
		}
		return obj, nil
	})
	return inf
}

// pagedLister is the ListerWatcher of an informer that has a Listing: its
// first list is a list in pages, each handed to the Listing as it comes,
// never a watch-list. The API server's watch cache hands every write to
// a resource to each of its watches, and ends one that falls behind; a
// watch still sending the initial events of a watch-list takes in none:
// a policy that writes, during its triggers' list, to the resource they
// are listed from (a ConfigMap for each ConfigMap) had that list cut
// short, and started over, again and again. A list in pages is read at
// a consistent revision whatever is written meanwhile, and its pages come
// as soon as a watch-list's objects do.
type pagedLister struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells client-go's reflector to list, not
// to watch-list.
func (pagedLister) IsWatchListSemanticsUnSupported() bool { return true }

// apiPrefix is the path of gvr's API group version.
func apiPrefix(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return "/api/" + gvr.Version
	}
	return "/apis/" + gvr.Group + "/" + gvr.Version
}

// NewRawClient returns a REST client for absolute paths, whose answers
// its callers decode themselves.
func NewRawClient(cfg *rest.Config) (rest.Interface, error) {
	rc := rest.CopyConfig(cfg)
	rc.APIPath, rc.GroupVersion = "/", &schema.GroupVersion{}
	rc.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(rc)
}

// Media types a watch asks for. Asked for protobuf, the API server may
// still answer JSON (an aggregated API that has no protobuf): openWatch
// reads which from the stream.
const (
	acceptJSON     = "application/json"
	acceptProtobuf = "application/vnd.kubernetes.protobuf;stream=watch, application/json"
)

// openWatch starts a watch of r with the options the reflector gives (the
// initial events of a watch-list included) and returns the decoder of its
// stream, which makes each object in form: a JSON stream starts with its
// first event's '{', a protobuf one with the length of its first frame.
func openWatch(ctx context.Context, raw rest.Interface, r Resource, o metav1.ListOptions, form Form) (watch.Decoder, error) {
	gvr := r.GVR
	o.Watch = true
	accept := acceptJSON
	if r.Protobuf {
		accept = acceptProtobuf
	}
	body, err := raw.Get().AbsPath(apiPrefix(gvr)).Namespace(r.Namespace).Resource(gvr.Resource).
		SpecificallyVersionedParams(&o, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		SetHeader("Accept", accept).
		Stream(ctx)
	if err != nil {
		return nil, err
	}
	stream := bufio.NewReaderSize(body, 64<<10)
	if r.Protobuf {
		if first, err := stream.Peek(1); err == nil && !isJSONStart(first[0]) {
			return newProtobufEvents(readCloser{stream, body}, form), nil
		}
	}
	return newEventDecoderOf(stream, body, form), nil
}

// CatchUp hands l, as a watch of r from revision since brings them, the
// objects that changed since, until l ends or ctx does: a reader takes
// them before the list's (Listing.Changed). since is a hint, not a
// promise: a revision the API server no longer holds, or any other
// error, ends the catch-up, and the list alone finds those objects.
func CatchUp(ctx context.Context, raw rest.Interface, r Resource, since string, form Form, l *Listing) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	d, err := openWatch(ctx, raw, r, metav1.ListOptions{LabelSelector: r.LabelSelector, ResourceVersion: since}, form)
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		typ, obj, err := d.Decode()
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil // the listing ended
			}
			return err
		case typ == watch.Error:
			return apierrors.FromObject(obj)
		case typ == watch.Added || typ == watch.Modified:
			if o, ok := obj.(*Object); ok {
				l.change(o)
			}
		}
	}
}

// readCloser reads what was buffered of a body, and closes the body.
type readCloser struct {
	io.Reader
	io.Closer
}

// isJSONStart reports whether a stream starting with b is JSON: a frame
// length's first byte is 0 but for frames of 16 MiB and more, and never
// '{' (2 GiB) or white space.
func isJSONStart(b byte) bool {
	return b == '{' || b == ' ' || b == '\t' || b == '\r' || b == '\n'
}

// protobufEvents reads a protobuf watch stream of a built-in resource
// (length-delimited frames, each a metav1.WatchEvent whose object is a
// protobuf object) and makes each object in its form from the typed
// object. Other clients of built-in resources (the controller manager, the
// kubelet, any typed client-go informer) watch in protobuf, and the API
// server encodes each event once per media type for all its watchers: a
// JSON watch of the ConfigMaps Sprout generates cost it an encoding of its
// own of every one. The generated objects' informers watch so; triggers
// do not (reconcile's newInformer says why).
//
// It reads what client-go's decoder reads, as client-go's typed watches
// do, but decodes each event's typed object straight from the frame read:
// client-go's decoder copies the object's bytes out of the event, then
// out of its envelope, before decoding it (two copies of every event). An
// event it does not read so, a Status or a frame that does not parse, is
// decoded as client-go does.
type protobufEvents struct {
	body   io.ReadCloser
	header [4]byte
	// frame holds the frame last read; the next one is read into it. The
	// typed objects decoded from it keep nothing of it: the generated
	// unmarshallers copy every string and byte slice they read.
	frame []byte
	form  Form
}

var _ watch.Decoder = (*protobufEvents)(nil)

// protobufWatch decodes the events of a protobuf watch stream, unwrapped,
// and protobufObjects their objects, built-in types without conversion;
// client-go's typed watches use the same.
var (
	protobufWatch   = protobuf.NewRawSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)
	protobufObjects = clientgoscheme.Codecs.UniversalDeserializer()
)

// maxFrame is the largest frame read, as client-go's decoder reads: a
// larger one is passed over, and its Decode fails.
const maxFrame = 16 << 20

func newProtobufEvents(body io.ReadCloser, form Form) *protobufEvents {
	return &protobufEvents{body: body, form: form}
}

// Decode returns the next event. Bookmarks and errors are typed objects
// (a Status for an error), which the reflector reads as it reads those of
// typed informers.
func (d *protobufEvents) Decode() (watch.EventType, runtime.Object, error) {
	frame, err := d.next()
	if err != nil {
		return "", nil, err
	}
	typ, obj, err := decodeEvent(frame)
	if err != nil {
		return "", nil, err
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted:
		o, err := d.form.fromTyped(obj)
		if err != nil {
			return "", nil, fmt.Errorf("watch event %s: %w", typ, err)
		}
		return typ, o, nil
	}
	return typ, obj, nil
}

// next reads the next frame: its length, 4 bytes big-endian, then as many
// bytes. At the end of the stream between two frames it returns io.EOF.
func (d *protobufEvents) next() ([]byte, error) {
	if _, err := io.ReadFull(d.body, d.header[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(d.header[:]))
	if n > maxFrame {
		if _, err := io.CopyN(io.Discard, d.body, int64(n)); err != nil {
			return nil, err
		}
		return nil, streaming.ErrObjectTooLarge
	}
	if cap(d.frame) < n {
		d.frame = make([]byte, n, max(n, 2*cap(d.frame)))
	}
	d.frame = d.frame[:n]
	if _, err := io.ReadFull(d.body, d.frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return d.frame, nil
}

// Field numbers of metav1.WatchEvent and of runtime.RawExtension.
const (
	watchEventType   protowire.Number = 1
	watchEventObject protowire.Number = 2
	rawExtensionRaw  protowire.Number = 1
)

// decodeEvent decodes the watch event frame holds. Its object is decoded
// from frame when it is a built-in type in a protobuf envelope, and as
// client-go decodes it otherwise, with client-go's errors.
func decodeEvent(frame []byte) (watch.EventType, runtime.Object, error) {
	typ, object, ok := wire.TwoFields(frame, watchEventType, watchEventObject)
	if !ok {
		return decodeEventAsClientGo(frame)
	}
	switch t := watch.EventType(typ); t {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		raw, _, ok := wire.TwoFields(object, rawExtensionRaw, 0)
		if !ok {
			return decodeEventAsClientGo(frame)
		}
		if obj := typedOf(raw); obj != nil {
			return t, obj, nil
		}
	}
	return decodeEventAsClientGo(frame)
}

// typedOf decodes a protobuf object of a built-in type from raw, as the
// protobuf serializer does, or returns nil.
func typedOf(raw []byte) runtime.Object {
	typeMeta, body, ok := wire.Envelope(raw)
	if !ok {
		return nil
	}
	gvk, ok := wire.Kind(typeMeta)
	if !ok {
		return nil
	}
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return nil
	}
	pb, ok := obj.(interface{ Unmarshal([]byte) error })
	if !ok || pb.Unmarshal(body) != nil {
		return nil
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

// decodeEventAsClientGo decodes frame as client-go's watch decoder does.
func decodeEventAsClientGo(frame []byte) (watch.EventType, runtime.Object, error) {
	var got metav1.WatchEvent
	res, _, err := protobufWatch.Decode(frame, nil, &got)
	if err != nil {
		return "", nil, err
	}
	if res != &got {
		return "", nil, fmt.Errorf("unable to decode to metav1.WatchEvent")
	}
	switch watch.EventType(got.Type) {
	case watch.Added, watch.Modified, watch.Deleted, watch.Error, watch.Bookmark:
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %v", got.Type)
	}
	obj, err := runtime.Decode(protobufObjects, got.Object.Raw)
	if err != nil {
		return "", nil, fmt.Errorf("unable to decode watch event: %v", err)
	}
	return watch.EventType(got.Type), obj, nil
}

// Close closes the stream, which ends a Decode under way.
func (d *protobufEvents) Close() { _ = d.body.Close() }
