package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	sigsjson "sigs.k8s.io/json"
)

// pages are lists as the API server writes them, and as it might: strings
// that hold braces, quotes and escapes, nested arrays, white space.
var pages = []string{
	`{"kind":"NamespaceList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"tok","remainingItemCount":7},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b","labels":{"x":"y"}}}]}`,
	`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`,
	`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[{"data":{"a":"}{","b":"\"}","c":"\\","d":"\\\"{"}},{"data":{"e":"[{]"}}]}`,
	" {\n \"apiVersion\" : \"v1\" ,\"kind\":\"List\", \"metadata\":{}, \"items\" : [ {\"a\":[{\"b\":{}},[]]} ,\n{ } ] } \n",
	`{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":"3"}}`,
	`{"other":{"items":[1]},"items":[{"x":"\u007b"}]}`,
}

// TestSplitJSONListAgreesWithUnmarshal: a list split has what decoding it
// whole gives, the items byte for byte.
func TestSplitJSONListAgreesWithUnmarshal(t *testing.T) {
	for _, page := range pages {
		got, ok := SplitJSONList([]byte(page))
		if !ok {
			t.Errorf("not split: %s", page)
			continue
		}
		var want JSONList
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts([]byte(page), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("split %s:\n got %+v\nwant %+v", page, got, want)
		}
	}
}

// TestSplitJSONListRefusesOtherShapes: what is not a list with its items
// last, each an object, is left to a decoder of any JSON, or refused.
func TestSplitJSONListRefusesOtherShapes(t *testing.T) {
	for _, page := range []string{
		`{"items":[{}],"metadata":{}}`,           // items not last
		`{"items":[1,2]}`,                        // items not objects
		`{"items":[{} {}]}`,                      // no comma
		`{"items":[{},]}`,                        // a trailing comma
		`{"items":[{"a":"}"]}`,                   // an object that does not end
		`{"items":[{}]}}`,                        // a brace too many
		`{"items":[{}]} x`,                       // something after
		`{"items":[{}]`,                          // cut short
		`{"kind":1,"items":[]}`,                  // kind not a string
		`{"metadata":{"continue":7},"items":[]}`, // continue not a string
		`[{"items":[]}]`,
		`{"kind":"a"}}`,
		``,
	} {
		if _, ok := SplitJSONList([]byte(page)); ok {
			t.Errorf("split %s", page)
		}
	}
}

// FuzzSplitJSONList: whatever is split, with items that are valid JSON, is
// valid JSON that decodes to what was split.
func FuzzSplitJSONList(f *testing.F) {
	for _, page := range pages {
		f.Add([]byte(page))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := SplitJSONList(body)
		if !ok {
			return
		}
		for _, item := range got.Items {
			if !json.Valid(item) {
				return // an item's decoder refuses it
			}
			if !bytes.HasPrefix(item, []byte("{")) || !bytes.HasSuffix(item, []byte("}")) {
				t.Fatalf("item %q is not an object's JSON", item)
			}
		}
		var want JSONList
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &want); err != nil {
			t.Fatalf("split %q, which does not decode: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split %q:\n got %+v\nwant %+v", body, got, want)
		}
	})
}
