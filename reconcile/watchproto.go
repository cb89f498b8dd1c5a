package reconcile

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// protobufEventDecoder reads a protobuf watch stream of a built-in
// resource and makes each object of what the informer's cache keeps
// (objectForm) from its typed object. Other clients of built-in resources (the controller manager, the
// kubelet, any typed client-go informer) watch in protobuf, and the API
// server encodes each event once per media type for all its watchers: a
// JSON watch of the ConfigMaps Sprout generates cost it an encoding of its
// own of every one. The generated objects' informers watch so (triggers do
// not: see newInformer).
//
// A stream is a sequence of frames, each its length as 4 bytes, big
// endian, then a metav1.WatchEvent, unwrapped, whose object is wrapped as
// a protobuf object is (runtime.Unknown after a magic number).
type protobufEventDecoder struct {
	body      io.Closer
	stream    *bufio.Reader
	fromTyped func(obj runtime.Object) (runtime.Object, error)
	// frame is reused: what a frame decodes into is copied out of it.
	frame []byte
}

var _ watch.Decoder = (*protobufEventDecoder)(nil)

// maxFrame bounds a frame: the API server stores objects of up to 1.5 MiB
// by default, and etcd refuses requests over 2 MiB.
const maxFrame = 64 << 20

// protobufDecoder decodes the built-in types, without conversion.
var protobufDecoder = clientgoscheme.Codecs.UniversalDeserializer()

func newProtobufEventDecoder(stream *bufio.Reader, body io.Closer, fromTyped func(obj runtime.Object) (runtime.Object, error)) *protobufEventDecoder {
	return &protobufEventDecoder{body: body, stream: stream, fromTyped: fromTyped}
}

// Decode returns the next event. Bookmarks and errors are typed objects
// (a Status for an error), which the reflector reads as it reads those of
// typed informers.
func (d *protobufEventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var size [4]byte
	if _, err := io.ReadFull(d.stream, size[:]); err != nil {
		return "", nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return "", nil, fmt.Errorf("watch event of %d bytes, more than %d", n, maxFrame)
	}
	if cap(d.frame) < int(n) {
		d.frame = make([]byte, n)
	}
	d.frame = d.frame[:n]
	if _, err := io.ReadFull(d.stream, d.frame); err != nil {
		return "", nil, err
	}
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(d.frame); err != nil {
		return "", nil, fmt.Errorf("watch event: %w", err)
	}
	typ := watch.EventType(ev.Type)
	obj, _, err := protobufDecoder.Decode(ev.Object.Raw, nil, nil)
	if err != nil {
		return "", nil, fmt.Errorf("watch event %s: %w", typ, err)
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted:
		obj, err := d.fromTyped(obj)
		if err != nil {
			return "", nil, fmt.Errorf("watch event %s: %w", typ, err)
		}
		return typ, obj, nil
	case watch.Error, watch.Bookmark:
		return typ, obj, nil
	}
	return "", nil, fmt.Errorf("got invalid watch event type: %v", typ)
}

// Close closes the stream, which ends a Decode under way.
func (d *protobufEventDecoder) Close() { _ = d.body.Close() }
