package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

// protobufStream is a protobuf watch stream of events: n ConfigMaps added,
// one modified and one deleted, a bookmark and an error.
func protobufStream(t testing.TB, n int) []byte {
	t.Helper()
	var stream []byte
	add := func(typ watch.EventType, obj runtime.Object) {
		var raw bytes.Buffer
		if err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Encode(obj, &raw); err != nil {
			t.Fatal(err)
		}
		event, err := (&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw.Bytes()}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		stream = binary.BigEndian.AppendUint32(stream, uint32(len(event)))
		stream = append(stream, event...)
	}
	cm := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-out", i), Namespace: "team", UID: "u-1", ResourceVersion: fmt.Sprint(100 + i),
				Labels:      map[string]string{"role": "copy", "app.kubernetes.io/managed-by": "sprout"},
				Annotations: map[string]string{"note": "ünïcode"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "sprout", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:source":{}}}`)}}},
			Data:       map[string]string{"source": fmt.Sprint("cm-", i)},
			BinaryData: map[string][]byte{"bin": {0, 1, 2, 255}},
		}
	}
	for i := range n {
		add(watch.Added, cm(i))
	}
	add(watch.Modified, cm(0))
	add(watch.Deleted, cm(1))
	add(watch.Bookmark, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "999", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	add(watch.Error, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Reason: metav1.StatusReasonExpired, Message: "too old resource version", Code: 410})
	return stream
}

// clientGoProtobufDecoder reads a protobuf watch stream as client-go's
// typed watches do.
func clientGoProtobufDecoder(r io.ReadCloser) watch.Decoder {
	frames := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(r), protobufWatch)
	return restwatch.NewDecoder(frames, protobufObjects)
}

// TestProtobufEventsDecodeAsClientGo: every event of a protobuf watch
// stream, objects, a bookmark and an error, decodes to what client-go's
// decoder makes of it, typed object for typed object, though read from the
// frame without copying it; the stream ends with io.EOF, and a stream cut
// inside a frame with io.ErrUnexpectedEOF.
func TestProtobufEventsDecodeAsClientGo(t *testing.T) {
	stream := protobufStream(t, 3)
	ours := &protobufEvents{body: io.NopCloser(bytes.NewReader(stream))}
	theirs := clientGoProtobufDecoder(io.NopCloser(bytes.NewReader(stream)))
	var events []watch.EventType
	var held []runtime.Object // kept while the frame is read over, to find one aliasing it
	for {
		frame, err := ours.next()
		wantTyp, wantObj, wantErr := theirs.Decode()
		if err != nil {
			if !errors.Is(err, io.EOF) || !errors.Is(wantErr, io.EOF) {
				t.Fatalf("after %d events: %v; client-go's %v", len(events), err, wantErr)
			}
			break
		}
		typ, obj, err := decodeEvent(frame)
		if err != nil || wantErr != nil {
			t.Fatalf("event %d: %v; client-go's %v", len(events), err, wantErr)
		}
		if typ != wantTyp || !equality.Semantic.DeepEqual(obj, wantObj) {
			t.Errorf("event %d: %s %#v\nclient-go's: %s %#v", len(events), typ, obj, wantTyp, wantObj)
		}
		events = append(events, typ)
		held = append(held, obj, wantObj)
	}
	want := []watch.EventType{watch.Added, watch.Added, watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error}
	if !equality.Semantic.DeepEqual(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}
	for i := 0; i < len(held); i += 2 {
		if !equality.Semantic.DeepEqual(held[i], held[i+1]) {
			t.Errorf("event %d changed once the frames after it were read: %#v", i/2, held[i])
		}
	}

	cut := &protobufEvents{body: io.NopCloser(bytes.NewReader(stream[:len(stream)-3]))}
	var err error
	for err == nil {
		_, _, err = cut.Decode()
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a stream cut inside a frame: %v, want %v", err, io.ErrUnexpectedEOF)
	}
}

// BenchmarkProtobufWatchDecode decodes a protobuf watch stream of 1,000
// generated ConfigMaps with Sprout's decoder and with client-go's, as
// typed objects (what Sprout then makes of them is not measured).
func BenchmarkProtobufWatchDecode(b *testing.B) {
	stream := protobufStream(b, 1000)
	for _, d := range []struct {
		name   string
		decode func(io.ReadCloser) func() error
	}{
		{"sprout", func(r io.ReadCloser) func() error {
			d := &protobufEvents{body: r}
			return func() error {
				frame, err := d.next()
				if err == nil {
					_, _, err = decodeEvent(frame)
				}
				return err
			}
		}},
		{"client-go", func(r io.ReadCloser) func() error {
			d := clientGoProtobufDecoder(r)
			return func() error { _, _, err := d.Decode(); return err }
		}},
	} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				next := d.decode(io.NopCloser(bytes.NewReader(stream)))
				for next() == nil {
				}
			}
		})
	}
}
