package wire

import (
	"bytes"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
)

// JSONList is a list in JSON, its items still JSON.
type JSONList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ListMeta   `json:"metadata"`
	Items      []json.RawMessage `json:"items"`
}

// SplitJSONList reads a list shaped as the API server writes one, its
// items last, without decoding them: it finds where each item begins and
// ends, and leaves checking an item to its decoder, which reads every byte
// of it anyway. Decoded whole, a list is read twice before its items are:
// checked, then skipped over item by item. It reports false for any other
// shape, for the caller to decode as any JSON. The items are copies.
func SplitJSONList(body []byte) (JSONList, bool) {
	var page JSONList
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return page, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return page, false
		}
		var raw json.RawMessage
		if key != "items" {
			if dec.Decode(&raw) != nil {
				return page, false
			}
		}
		switch key {
		case "apiVersion":
			err = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &page.APIVersion)
		case "kind":
			err = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &page.Kind)
		case "metadata":
			err = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &page.Metadata)
		case "items":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return page, false
			}
			items, end, ok := splitObjects(body, int(dec.InputOffset()))
			if !ok || !onlyClosing(body[end:]) {
				return page, false
			}
			page.Items = items
			return page, true
		}
		if err != nil {
			return page, false
		}
	}
	t, err := dec.Token()
	return page, err == nil && t == json.Delim('}') && skipSpace(body, int(dec.InputOffset())) == len(body)
}

// splitObjects returns the JSON objects of the array whose elements begin
// at b[at], each a copy, and where the array ends. It checks the array's
// punctuation, not the objects': their decode does.
func splitObjects(b []byte, at int) (items []json.RawMessage, end int, ok bool) {
	i := skipSpace(b, at)
	if i < len(b) && b[i] == ']' {
		return []json.RawMessage{}, i + 1, true
	}
	for i < len(b) && b[i] == '{' {
		n := objectEnd(b[i:])
		if n < 0 {
			return nil, 0, false
		}
		items = append(items, bytes.Clone(b[i:i+n]))
		i = skipSpace(b, i+n)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return items, i + 1, true
		default:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// objectEnd returns the length of the JSON object b begins with, found by
// its braces outside strings, or -1 when it does not end.
func objectEnd(b []byte) int {
	depth := 0
	// Outside strings an object has few bytes; a string's are passed over
	// by IndexByte (stringEnd).
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		case '"':
			if i = stringEnd(b, i); i < 0 {
				return -1
			}
		}
	}
	return -1
}

// stringEnd returns where the JSON string that begins at b[at] ends: its
// closing quote, the first one not escaped; -1 when there is none.
func stringEnd(b []byte, at int) int {
	for k := at + 1; k < len(b); k++ {
		q := bytes.IndexByte(b[k:], '"')
		if q < 0 {
			return -1
		}
		k += q
		escapes := 0
		for m := k - 1; m > at && b[m] == '\\'; m-- {
			escapes++
		}
		if escapes%2 == 0 {
			return k
		}
	}
	return -1
}

// skipSpace returns the index of the first byte from at that is not JSON
// white space.
func skipSpace(b []byte, at int) int {
	for at < len(b) && (b[at] == ' ' || b[at] == '\t' || b[at] == '\n' || b[at] == '\r') {
		at++
	}
	return at
}

// onlyClosing reports whether b is the end of an object: white space, its
// closing brace, white space.
func onlyClosing(b []byte) bool {
	i := skipSpace(b, 0)
	return i < len(b) && b[i] == '}' && skipSpace(b, i+1) == len(b)
}
