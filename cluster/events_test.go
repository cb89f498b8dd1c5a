package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

// watchStream returns n watch events of Namespaces as the API server sends
// them, followed by a bookmark and an ERROR event.
func watchStream(t testing.TB, n int) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range n {
		ev := event{"ADDED", map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{
				"name": fmt.Sprintf("ns-%05d", i), "uid": fmt.Sprintf("0c5d6e4a-3f6b-4c1e-9d1a-%012d", i),
				"resourceVersion": fmt.Sprint(1000 + i), "creationTimestamp": "2026-11-22T10:00:00Z",
				"labels": map[string]any{"kubernetes.io/metadata.name": fmt.Sprintf("ns-%05d", i), "color": "red"},
				"managedFields": []any{map[string]any{"manager": "bench", "operation": "Update", "apiVersion": "v1",
					"time": "2026-11-22T10:00:00Z", "fieldsType": "FieldsV1",
					"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:color": map[string]any{}}}}}},
			},
			"spec":   map[string]any{"finalizers": []any{"kubernetes"}, "replicas": 3, "ratio": 0.5},
			"status": map[string]any{"phase": "Active"},
		}}
		if err := enc.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	_ = enc.Encode(event{"BOOKMARK", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"resourceVersion": "99999", "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}}})
	_ = enc.Encode(event{"ERROR", map[string]any{"apiVersion": "v1", "kind": "Status",
		"status": "Failure", "reason": "Expired", "code": 410, "message": "too old resource version"}})
	return b.Bytes()
}

// event is a watch event as the API server encodes it (metav1.WatchEvent):
// its type first, one event a line.
type event struct {
	Type   string `json:"type"`
	Object any    `json:"object"`
}

// TestEventDecoderReadsStreamsNotWrittenAnEventALine: a stream whose
// events are not one a line, or not in the API server's member order,
// decodes as client-go decodes it, from its first such event on.
func TestEventDecoderReadsStreamsNotWrittenAnEventALine(t *testing.T) {
	lines := bytes.SplitAfter(watchStream(t, 3), []byte("\n"))
	var reordered, indented bytes.Buffer
	reordered.Write(lines[0]) // read as a line, then the rest as a JSON stream
	indented.Write(lines[0])
	for _, line := range lines[1:] {
		var ev map[string]any
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		sorted, _ := json.Marshal(ev) // "object" before "type"
		reordered.Write(append(sorted, '\n'))
		pretty, _ := json.MarshalIndent(ev, "", "  ")
		indented.Write(append(pretty, '\n'))
	}
	for name, stream := range map[string][]byte{"members reordered": reordered.Bytes(), "indented": indented.Bytes()} {
		t.Run(name, func(t *testing.T) {
			events := decodeAlongside(t, stream, Triggers, func(n int, typ watch.EventType, obj runtime.Object, want *unstructured.Unstructured) {
				if typ != watch.Added {
					return
				}
				if got := obj.(*Object).Decode().Object; !equality.Semantic.DeepEqual(got["metadata"].(map[string]any)["name"], want.GetName()) {
					t.Errorf("event %d: %v, client-go's %s", n, got["metadata"], want.GetName())
				}
			})
			if events != 5 {
				t.Errorf("%d events decoded, want 5", events)
			}
		})
	}
}

// TestSplitEvent: only a line that is one event as the API server writes
// it is split without a parse.
func TestSplitEvent(t *testing.T) {
	for line, want := range map[string]string{
		`{"type":"ADDED","object":{"kind":"Namespace"}}` + "\n": `ADDED {"kind":"Namespace"}`,
		`{"type":"DELETED","object":{"a":"}"}}`:                 `DELETED {"a":"}"}`,
		`{"object":{"kind":"Namespace"},"type":"ADDED"}`:        "",
		`{"type":"ADD\"ED","object":{}}`:                        "",
		`{"type":"ADDED", "object":{}}`:                         "",
		`{"type":"ADDED","object":{}`:                           `ADDED {`, // which the form's parse rejects
		` {"type":"ADDED","object":{}}`:                         "",
	} {
		typ, object, ok := splitEvent([]byte(line))
		got := ""
		if ok {
			got = string(typ) + " " + string(object)
		}
		if got != want {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
	}
}

// clientGoDecoder is the watch decoder the dynamic client uses.
func clientGoDecoder(body io.ReadCloser) watch.Decoder {
	info, _ := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.WithoutConversion().SupportedMediaTypes(), runtime.ContentTypeJSON)
	s := info.StreamSerializer
	return restwatch.NewDecoder(streaming.NewDecoder(s.Framer.NewFrameReader(body), s.Serializer), unstructured.UnstructuredJSONScheme)
}

// TestTriggerEventDecoderDecodesAsClientGo: every event of a stream of
// triggers, its type and object, comes out as client-go's decoder gives it:
// an object as the trigger cache makes it of client-go's (its metadata
// apart, the rest decoding to the same maps, integers as int64, others as
// float64); the ERROR event reads as the API error it carries.
func TestTriggerEventDecoderDecodesAsClientGo(t *testing.T) {
	stream := watchStream(t, 3)
	events := decodeAlongside(t, stream, Triggers, func(n int, typ watch.EventType, obj runtime.Object, want *unstructured.Unstructured) {
		switch typ {
		case watch.Added:
			o, ok := obj.(*Object)
			if !ok {
				t.Fatalf("event %d: a %T, not an Object", n, obj)
			}
			made, err := Triggers.FromList(want.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(o.Decode().Object, made.Decode().Object) {
				t.Errorf("event %d: object\n%v\nclient-go's, cached\n%v", n, o.Decode().Object, made.Decode().Object)
			}
			if _, ok := o.Decode().Object["metadata"].(map[string]any)["managedFields"]; ok {
				t.Errorf("event %d: managed fields kept", n)
			}
			if o.created == 0 || o.created != made.created || o.deleting != made.deleting || o.apart != made.apart {
				t.Errorf("event %d: created %v, deleting %v, apart %03b; client-go's %v, %v, %03b", n, o.created, o.deleting, o.apart, made.created, made.deleting, made.apart)
			}
			if g, w := readOf(o), readOf(made); g != w {
				t.Errorf("event %d: metadata %+v, client-go's %+v", n, g, w)
			}
		default:
			if !equality.Semantic.DeepEqual(obj.(*unstructured.Unstructured).Object, want.Object) {
				t.Errorf("event %d: object\n%#v\nclient-go's\n%#v", n, obj, want)
			}
		}
		if typ == watch.Error && !apierrors.IsResourceExpired(apierrors.FromObject(obj)) {
			t.Errorf("ERROR event reads as %v, not as Expired", apierrors.FromObject(obj))
		}
	})
	if events != 5 {
		t.Fatalf("decoded %d events, want 5", events)
	}
	_, first, err := newEventDecoder(io.NopCloser(bytes.NewReader(stream)), Triggers).Decode()
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(first.(*Object).Decode().Object, "spec")
	if _, ok := spec["replicas"].(int64); !ok {
		t.Errorf("replicas is a %T, not int64", spec["replicas"])
	}
	if _, ok := spec["ratio"].(float64); !ok {
		t.Errorf("ratio is a %T, not float64", spec["ratio"])
	}
}

// TestEventDecoderRejectsUnknownTypes: a stream that is not a watch stream
// is an error, not an event, whatever the cache keeps.
func TestEventDecoderRejectsUnknownTypes(t *testing.T) {
	for _, form := range []Form{Triggers, Generated(nil)} {
		for _, s := range []string{`{"type":"RENAMED","object":{"kind":"Namespace"}}`, `{"type":"ADDED"}`, `{"type":"ADDED","object":[1]}`, `{"type":"ADDED","object":{}`} {
			if _, _, err := newEventDecoder(io.NopCloser(bytes.NewReader([]byte(s))), form).Decode(); err == nil {
				t.Errorf("%s: decoded without an error", s)
			}
		}
	}
}

// TestCachedEventDecoderDecodesAsClientGo: the decoder of downstream
// informers gives each object as NewCached makes it of what client-go's
// decoder gives, and bookmarks and errors as client-go's decoder does, so
// that the reflector reads the end of a watch-list's initial events and an
// expired watch.
func TestCachedEventDecoderDecodesAsClientGo(t *testing.T) {
	stream := watchStream(t, 3)
	events := decodeAlongside(t, stream, Generated(nil), func(events int, typ watch.EventType, obj runtime.Object, want *unstructured.Unstructured) {
		switch typ {
		case watch.Added:
			c, ok := obj.(*Object)
			if !ok {
				t.Fatalf("event %d: a %T, not an Object", events, obj)
			}
			made, err := Generated(nil).FromList(want)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(c.Decode().Object, made.Decode().Object) || c.GetResourceVersion() != made.GetResourceVersion() {
				t.Errorf("event %d: object\n%v\nclient-go's, cached\n%v", events, c.Decode().Object, made.Decode().Object)
			}
		default:
			if !equality.Semantic.DeepEqual(obj.(*unstructured.Unstructured).Object, want.Object) {
				t.Errorf("event %d: object\n%#v\nclient-go's\n%#v", events, obj, want)
			}
		}
	})
	if events != 5 {
		t.Fatalf("decoded %d events, want 5", events)
	}
}

// decodeAlongside decodes stream with ours, for a cache of form, and with
// client-go's decoder, which must agree on every event's type and on where
// the stream ends, and hands check each event with client-go's object; it
// returns how many events there were.
func decodeAlongside(t *testing.T, stream []byte, form Form, check func(n int, typ watch.EventType, obj runtime.Object, want *unstructured.Unstructured)) int {
	t.Helper()
	dec, theirs := newEventDecoder(io.NopCloser(bytes.NewReader(stream)), form), clientGoDecoder(io.NopCloser(bytes.NewReader(stream)))
	events := 0
	for {
		typ, obj, err := dec.Decode()
		wantTyp, wantObj, wantErr := theirs.Decode()
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("event %d: error %v, client-go's %v", events, err, wantErr)
		}
		if err != nil {
			if err != io.EOF {
				t.Fatalf("event %d: %v", events, err)
			}
			return events
		}
		events++
		if typ != wantTyp {
			t.Errorf("event %d: type %s, client-go's %s", events, typ, wantTyp)
		}
		check(events, typ, obj, wantObj.(*unstructured.Unstructured))
	}
}

// BenchmarkWatchDecode decodes a watch stream of 1,000 Namespaces with
// Sprout's decoder and with client-go's.
func BenchmarkWatchDecode(b *testing.B) {
	stream := watchStream(b, 1000)
	for _, d := range []struct {
		name string
		new  func(io.ReadCloser) watch.Decoder
	}{
		{"sprout-triggers", func(r io.ReadCloser) watch.Decoder { return newEventDecoder(r, Triggers) }},
		{"sprout-downstream", func(r io.ReadCloser) watch.Decoder {
			return newEventDecoder(r, Generated(nil))
		}},
		{"client-go", clientGoDecoder},
	} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				dec := d.new(io.NopCloser(bytes.NewReader(stream)))
				for {
					if _, _, err := dec.Decode(); err != nil {
						break
					}
				}
			}
		})
	}
}

// TestTriggerContentKeepsIdentityApart: a trigger's UID, resourceVersion
// and creationTimestamp are cut from its cached JSON where each is found
// once as the cache keeps it, and put back when it is decoded: the object
// decodes as it was sent, whatever the members' order and neighbours.
func TestTriggerContentKeepsIdentityApart(t *testing.T) {
	for name, tt := range map[string]struct {
		raw   string
		apart identity
	}{
		"as the API server writes it": {`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"a","uid":"u-1","resourceVersion":"7","creationTimestamp":"2026-11-22T10:00:00Z","labels":{"x":"y"}},"spec":{}}`,
			apartUID | apartResourceVersion | apartCreated},
		"first and last in metadata": {`{"metadata":{"creationTimestamp":"2026-11-22T10:00:00Z","resourceVersion":"7","uid":"u-1"},"kind":"Namespace","apiVersion":"v1"}`,
			apartUID | apartResourceVersion | apartCreated},
		"the version elsewhere too": {`{"kind":"Namespace","apiVersion":"v1","metadata":{"uid":"u-1","resourceVersion":"7"},"status":{"resourceVersion":"7"}}`,
			apartUID},
		"no creationTimestamp": {`{"kind":"Namespace","apiVersion":"v1","metadata":{"uid":"u-1","resourceVersion":"7"}}`,
			apartUID | apartResourceVersion},
		"a creationTimestamp finer than seconds": {`{"kind":"Namespace","apiVersion":"v1","metadata":{"uid":"u-1","creationTimestamp":"2026-11-22T10:00:00.5Z"}}`,
			apartUID},
	} {
		t.Run(name, func(t *testing.T) {
			o, err := Triggers.FromJSON([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if o.apart != tt.apart {
				t.Errorf("kept apart %03b, want %03b (content %s)", o.apart, tt.apart, o.body.Load().content)
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tt.raw), &want); err != nil {
				t.Fatal(err)
			}
			if got := o.Decode().Object; !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("decoded %v, want %v (content %s)", got, want, o.body.Load().content)
			}
			listed, err := Triggers.FromList(&unstructured.Unstructured{Object: want})
			if err != nil {
				t.Fatal(err)
			}
			if listed.apart != o.apart || !equality.Semantic.DeepEqual(listed.Decode().Object, want) {
				t.Errorf("from a list: apart %03b, decoded %v", listed.apart, listed.Decode().Object)
			}
		})
	}
}
