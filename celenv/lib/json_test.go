package lib_test

import (
	"testing"
	"time"
)

func TestJSONLibrary(t *testing.T) {
	runLibCases(t, time.Time{}, []libCase{
		{name: "unmarshal an object", expr: `json.unmarshal('{"key": "value", "n": [1, true, null]}')`,
			want: map[string]any{"key": "value", "n": []any{1.0, true, nil}}},
		{name: "numbers are doubles, as in Kyverno", expr: `json.unmarshal('{"count": 5}').count == 5.0`, want: true},
		{name: "unmarshal a list", expr: `json.unmarshal('[1, 2, 3]').size()`, want: int64(3)},
		{name: "unmarshal invalid JSON from the object", expr: `json.unmarshal(object.metadata.name)`, wantErr: "json.unmarshal: invalid character"},
		{name: "unmarshal rejects a non-string at compile time", expr: `json.unmarshal(1)`,
			wantErr: "found no matching overload for 'unmarshal'"},
		{name: "marshal sorts keys", expr: `json.marshal({"b": [1, 2.5], "a": "x", "c": null})`,
			want: `{"a":"x","b":[1,2.5],"c":null}`},
		{name: "marshal then unmarshal", expr: `json.unmarshal(json.marshal({"a": {"b": true}})).a.b`, want: true},
		{name: "marshal a timestamp as RFC 3339", expr: `json.marshal([timestamp("2025-01-02T03:04:05Z")])`,
			want: `["2025-01-02T03:04:05Z"]`},
		{name: "marshal a map with an int key fails", expr: `json.marshal({1: "a"})`, wantErr: "json.marshal"},
	})
}

func TestYAMLLibrary(t *testing.T) {
	runLibCases(t, time.Time{}, []libCase{
		{name: "parse a map", expr: `yaml.parse('key: value')`, want: map[string]any{"key": "value"}},
		{name: "parse a nested field", expr: `yaml.parse('count: 42').count == 42`, want: true},
		{name: "parse lists", expr: "yaml.parse('items:\\n- a\\n- b\\n- c').items", want: []any{"a", "b", "c"}},
		{name: "parse a scalar", expr: `yaml.parse('true')`, want: true},
		{name: "parse invalid YAML", expr: `yaml.parse('a: [')`, wantErr: "yaml.parse:"},
		{name: "parse rejects a non-string at compile time", expr: `yaml.parse(['a'])`,
			wantErr: "found no matching overload for 'parse'"},
	})
}
