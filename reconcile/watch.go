package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// objectForm is how an informer's cache keeps objects: made from the JSON
// of a watch event's object, without decoding it into maps, from the typed
// object of a protobuf watch event, or from an object a list gave.
type objectForm struct {
	fromJSON  func(raw []byte) (runtime.Object, error)
	fromTyped func(obj runtime.Object) (runtime.Object, error)
	fromList  func(u *unstructured.Unstructured) (runtime.Object, error)
}

// triggerForm keeps cachedObjects.
var triggerForm = objectForm{
	fromJSON:  func(raw []byte) (runtime.Object, error) { return cachedObjectFromJSON(raw) },
	fromTyped: viaJSON(func(raw []byte) (runtime.Object, error) { return cachedObjectFromJSON(raw) }),
	fromList:  func(u *unstructured.Unstructured) (runtime.Object, error) { return newCachedObject(u) },
}

// downstreamForm keeps inventory.Cached objects of the objects a writes:
// the versions its creates made are kept released.
func downstreamForm(a *inventory.Applier) objectForm {
	return objectForm{
		fromJSON:  func(raw []byte) (runtime.Object, error) { return a.CachedFromJSON(raw) },
		fromTyped: func(obj runtime.Object) (runtime.Object, error) { return a.CachedFromObject(obj) },
		fromList:  func(u *unstructured.Unstructured) (runtime.Object, error) { return inventory.NewCached(u) },
	}
}

// viaJSON makes a form's object of a typed object from its JSON, as the
// API server's JSON serializer writes it (encoding/json on the typed
// struct, its kind set by the decoder).
func viaJSON(fromJSON func(raw []byte) (runtime.Object, error)) func(runtime.Object) (runtime.Object, error) {
	return func(obj runtime.Object) (runtime.Object, error) {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		return fromJSON(raw)
	}
}

// newUnstructuredInformer makes an informer on w's resource in its
// namespace ("" for every namespace), as the dynamic informer does, whose cache keeps objects in form: its watch
// decodes each event in one pass (see eventDecoder), and its transform
// makes the form of what a list returns. With protobuf, for a built-in
// resource, the watch asks for protobuf (see protobufEventDecoder).
func newUnstructuredInformer(dyn dynamic.Interface, raw rest.Interface, w watchKey, indexers cache.Indexers, tweak func(*metav1.ListOptions), form objectForm, protobuf bool) cache.SharedIndexInformer {
	gvr := w.gvr
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&o)
			}
			return dyn.Resource(gvr).Namespace(w.namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&o)
			}
			return watchUnstructured(ctx, raw, w, o, protobuf, form)
		},
	}
	// No example type: a list gives unstructured objects, a watch the form.
	inf := cache.NewSharedIndexInformerWithOptions(lw, nil,
		cache.SharedIndexInformerOptions{Indexers: indexers, ObjectDescription: gvr.String()})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return form.fromList(u)
		}
		return obj, nil
	})
	return inf
}

// newRawClient returns a REST client for absolute paths, whose answers
// its callers decode themselves.
func newRawClient(cfg *rest.Config) (rest.Interface, error) {
	rc := rest.CopyConfig(cfg)
	rc.APIPath, rc.GroupVersion = "/", &schema.GroupVersion{}
	rc.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(rc)
}

// watchUnstructured watches w's resource in its namespace, with the options the
// reflector gives (the initial events of a watch-list included), making
// each object of form.
func watchUnstructured(ctx context.Context, raw rest.Interface, w watchKey, o metav1.ListOptions, protobuf bool, form objectForm) (watch.Interface, error) {
	d, err := openWatch(ctx, raw, w, o, protobuf, form)
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(d,
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// Media types a watch asks for. Asked for protobuf, the API server may
// still answer JSON (an aggregated API that has no protobuf): openWatch
// reads which from the stream.
const (
	acceptJSON     = "application/json"
	acceptProtobuf = "application/vnd.kubernetes.protobuf;stream=watch, application/json"
)

// openWatch starts the watch and returns the decoder of its stream: a
// JSON stream starts with its first event's '{', a protobuf one with the
// length of its first frame.
func openWatch(ctx context.Context, raw rest.Interface, w watchKey, o metav1.ListOptions, protobuf bool, form objectForm) (watch.Decoder, error) {
	gvr := w.gvr
	o.Watch = true
	prefix := "/apis/" + gvr.Group + "/" + gvr.Version
	if gvr.Group == "" {
		prefix = "/api/" + gvr.Version
	}
	accept := acceptJSON
	if protobuf {
		accept = acceptProtobuf
	}
	body, err := raw.Get().AbsPath(prefix).Namespace(w.namespace).Resource(gvr.Resource).
		SpecificallyVersionedParams(&o, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		SetHeader("Accept", accept).
		Stream(ctx)
	if err != nil {
		return nil, err
	}
	stream := bufio.NewReaderSize(body, 64<<10)
	if protobuf {
		if first, err := stream.Peek(1); err == nil && !isJSONStart(first[0]) {
			return newProtobufEventDecoder(stream, body, form.fromTyped), nil
		}
	}
	return newEventDecoderOf(stream, body, form.fromJSON), nil
}

// isJSONStart reports whether a stream starting with b is JSON: a frame
// length's first byte is 0 but for frames of 16 MiB and more, and never
// '{' (2 GiB) or white space.
func isJSONStart(b byte) bool {
	return b == '{' || b == ' ' || b == '\t' || b == '\r' || b == '\n'
}

// eventDecoder reads a JSON watch stream, each event in one pass, and
// makes each object of what the informer's cache keeps (objectForm), without
// decoding it into maps. client-go's watch decoder reads each event four
// times over: the framer scans it, the serializer parses it once for its
// kind and again as a WatchEvent, and the embedded object is parsed a third
// time. That was a large part of Sprout's CPU while it listed Namespaces
// and while it watched the ConfigMaps it created (BenchmarkWatchDecode
// compares the two decoders).
//
// The API server writes one event a line, `{"type":…,"object":…}` with
// nothing else: the decoder takes the object's bytes from the line, and
// only the object is parsed (by its form, which rejects what is not one
// JSON value). A stream written otherwise is read as a JSON stream from
// its first line that is not such an event on.
//
// Bookmarks and errors, which the reflector reads as metadata or a Status,
// are decoded into unstructured objects, numbers as the unstructured
// convention has them: int64 when whole, float64 otherwise.
type eventDecoder struct {
	body  io.Closer
	lines *bufio.Reader
	// stream reads the rest of a stream not written one event a line.
	stream  sigsjson.Decoder
	compact func(raw []byte) (runtime.Object, error)
}

var _ watch.Decoder = (*eventDecoder)(nil)

// newEventDecoder returns a decoder of the watch stream body that makes
// each object with compact.
func newEventDecoder(body io.ReadCloser, compact func(raw []byte) (runtime.Object, error)) *eventDecoder {
	return newEventDecoderOf(bufio.NewReaderSize(body, 64<<10), body, compact)
}

// newEventDecoderOf returns a decoder of the watch stream read from lines,
// which body's Close ends.
func newEventDecoderOf(lines *bufio.Reader, body io.Closer, compact func(raw []byte) (runtime.Object, error)) *eventDecoder {
	return &eventDecoder{body: body, lines: lines, compact: compact}
}

// rawWatchEvent is metav1.WatchEvent with its object as it was sent.
type rawWatchEvent struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Decode returns the next event. An ERROR event's object is a Status as
// an unstructured object, which apierrors.FromObject reads.
func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	typ, object, err := d.next()
	if err != nil {
		return "", nil, err
	}
	if len(object) == 0 || string(object) == "null" {
		return "", nil, fmt.Errorf("watch event %s has no object", typ)
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted:
		obj, err := d.compact(object)
		if err != nil {
			return "", nil, fmt.Errorf("watch event %s: %w", typ, err)
		}
		return typ, obj, nil
	case watch.Error, watch.Bookmark:
		var m map[string]any
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(object, &m); err != nil {
			return "", nil, fmt.Errorf("watch event %s: %w", typ, err)
		}
		return typ, &unstructured.Unstructured{Object: m}, nil
	}
	return "", nil, fmt.Errorf("got invalid watch event type: %v", typ)
}

// next returns the next event's type and its object as sent, which is the
// caller's.
func (d *eventDecoder) next() (watch.EventType, []byte, error) {
	if d.stream == nil {
		line, err := d.readLine()
		if err != nil {
			return "", nil, err
		}
		if typ, object, ok := splitEvent(line); ok {
			return typ, object, nil
		}
		d.stream = sigsjson.NewDecoderCaseSensitivePreserveInts(io.MultiReader(bytes.NewReader(line), d.lines))
	}
	var ev rawWatchEvent
	if err := d.stream.Decode(&ev); err != nil {
		return "", nil, err
	}
	return ev.Type, ev.Object, nil
}

// readLine returns the next line that is not blank, a copy of its own.
func (d *eventDecoder) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := d.lines.ReadSlice('\n')
		line = append(line, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		case len(bytes.TrimSpace(line)) > 0:
			return line, nil
		case err != nil:
			return nil, err // io.EOF
		}
		line = line[:0]
	}
}

// eventPrefix and objectMember frame an event as the API server writes
// it (metav1.WatchEvent: its type, then its object).
const (
	eventPrefix  = `{"type":"`
	objectMember = `","object":`
)

// splitEvent returns the type and object of line when it is one event as
// the API server writes it. The object is a part of line.
func splitEvent(line []byte) (watch.EventType, []byte, bool) {
	line = bytes.TrimRight(line, " \t\r\n")
	if !bytes.HasPrefix(line, []byte(eventPrefix)) || !bytes.HasSuffix(line, []byte("}")) {
		return "", nil, false
	}
	rest := line[len(eventPrefix) : len(line)-1]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 || !bytes.HasPrefix(rest[end:], []byte(objectMember)) {
		return "", nil, false
	}
	return watch.EventType(rest[:end]), rest[end+len(objectMember):], true
}

// Close closes the stream, which ends a Decode under way.
func (d *eventDecoder) Close() { _ = d.body.Close() }
