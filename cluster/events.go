package cluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	sigsjson "sigs.k8s.io/json"
)

// eventDecoder reads a JSON watch stream, each event in one pass, and
// makes each object in the form of the informer's cache (Form), without
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
	stream sigsjson.Decoder
	form   Form
}

var _ watch.Decoder = (*eventDecoder)(nil)

// newEventDecoder returns a decoder of the watch stream body that makes
// each object in form.
func newEventDecoder(body io.ReadCloser, form Form) *eventDecoder {
	return newEventDecoderOf(bufio.NewReaderSize(body, 64<<10), body, form)
}

// newEventDecoderOf returns a decoder of the watch stream read from lines,
// which body's Close ends.
func newEventDecoderOf(lines *bufio.Reader, body io.Closer, form Form) *eventDecoder {
	return &eventDecoder{body: body, lines: lines, form: form}
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
		obj, err := d.form.FromJSON(object)
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
