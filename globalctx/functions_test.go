package globalctx

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestKyvernoFunctions: each of Kyverno's JMESPath functions Sprout has
// gives Kyverno's result, the cases and expected values taken from
// Kyverno's own tests (pkg/engine/jmespath). want is JSON; wantErr a part
// of the error.
func TestKyvernoFunctions(t *testing.T) {
	tests := []struct {
		expr    string
		data    string
		want    string
		wantErr string
	}{
		{expr: "compare('a', 'a')", want: "0"},
		{expr: "compare('a', 'b')", want: "-1"},
		{expr: "compare('b', 'a')", want: "1"},
		{expr: "equal_fold('Go', 'go')", want: "true"},
		{expr: "equal_fold('1', 'b')", want: "false"},
		{expr: "replace('Lorem ipsum ipsum ipsum dolor sit amet', 'ipsum', 'muspi', `-1`)", want: `"Lorem muspi muspi muspi dolor sit amet"`},
		{expr: "replace('Lorem ipsum ipsum ipsum dolor sit amet', 'ipsum', 'muspi', `1`)", want: `"Lorem muspi ipsum ipsum dolor sit amet"`},
		{expr: "replace_all('Lorem ipsum dolor sit amet', 'ipsum', 'muspi')", want: `"Lorem muspi dolor sit amet"`},
		{expr: "to_upper('a#%&123Bc')", want: `"A#%&123BC"`},
		{expr: "to_lower('a#%&123Bc')", want: `"a#%&123bc"`},
		{expr: "trim('¡¡¡Hello, Gophers!!!', '!¡')", want: `"Hello, Gophers"`},
		{expr: "trim_prefix('Hello, Gophers', 'Hello, ')", want: `"Gophers"`},
		{expr: "split('Hello, Gophers', ', ')", want: `["Hello", "Gophers"]`},
		{expr: "regex_match('12.*', foo)", data: `{"foo": "123"}`, want: "true"},
		{expr: "regex_match('12.*', abs(foo))", data: `{"foo": -123}`, want: "true"},
		{expr: "regex_match('[', 'x')", wantErr: "error parsing regexp: missing closing ]"},
		{expr: "regex_replace_all('[', 'x', 'y')", wantErr: "JMESPath function 'regex_replace_all': error parsing regexp"},
		{expr: "pattern_match('prefix-*', foo)", data: `{"foo": "prefix-foo"}`, want: "true"},
		{expr: "pattern_match('12*', abs(foo))", data: `{"foo": -123}`, want: "true"},
		{expr: "pattern_match('my-?-bucket/abc*', 'my--bucket/abc')", want: "false"},
		{expr: "pattern_match('my-?-bucket/abc*', 'my-1-bucket/abc')", want: "true"},
		{expr: "pattern_match('my-bucket/mnop*?', 'my-bucket/mnop')", want: "false"},
		{expr: "pattern_match('my-bucket/mnop*?', 'my-bucket/mnopqrst/mnopqr')", want: "true"},
		{expr: "pattern_match('', '')", want: "true"},
		{expr: "regex_replace_all('([Hh]e|G)l', spec.field, '${2}G')", data: `{"spec": {"field": "Hello world, helworldlo"}}`, want: `"Glo world, Gworldlo"`},
		{expr: "regex_replace_all_literal('[Hh]el?', spec.field, 'G')", data: `{"spec": {"field": "Hello world, helworldlo"}}`, want: `"Glo world, Gworldlo"`},
		{expr: "label_match(`{\"app\": \"test-app\"}`, metadata.labels)", data: `{"metadata": {"labels": {"app": "test-app", "controller-name": "test-controller"}}}`, want: "true"},
		{expr: "label_match(`{\"app\": \"test-app2\"}`, metadata.labels)", data: `{"metadata": {"labels": {"app": "test-app"}}}`, want: "false"},
		{expr: "to_boolean('TRUE')", want: "true"},
		{expr: "to_boolean('no')", wantErr: "JMESPath function 'to_boolean': lowercase argument must be 'true' or 'false' (provided: 'no')"},
		{expr: "round(`9.414675`, `2`)", want: "9.41"},
		{expr: "round(`14`, `-2`)", wantErr: "out of bounds"},
		{expr: "base64_decode('SGVsbG8sIHdvcmxkIQ==')", want: `"Hello, world!"`},
		{expr: "base64_encode('Hello, world!')", want: `"SGVsbG8sIHdvcmxkIQ=="`},
		{expr: "path_canonicalize('/var/run///containerd////')", want: `"/var/run/containerd"`},
		{expr: "path_canonicalize('/../../')", want: `"/"`},
		{expr: "truncate('Lorem ipsum ipsum ipsum dolor sit amet', `11`)", want: `"Lorem ipsum"`},
		{expr: "truncate('Lorem ipsum', `2.6`)", want: `"Lo"`},
		{expr: "truncate('Lorem ipsum', `-1`)", want: `""`},
		{expr: "semver_compare('4.1.3','>=4.1.x')", want: "true"},
		{expr: "semver_compare('4.1.3','!4.x.x')", want: "false"},
		{expr: "semver_compare('2.1.5','<2.0.0 || >=3.0.0')", want: "false"},
		{expr: `parse_json('{"a": [1, "x"]}')`, want: `{"a": [1, "x"]}`},
		{expr: "parse_yaml('a: [1, x]')", want: `{"a": [1, "x"]}`},
		{expr: "lookup(`{\"key1\": \"value1\"}`, 'key1')", want: `"value1"`},
		{expr: "lookup(`[\"item0\", \"item1\", \"item2\"]`, `2`)", want: `"item2"`},
		{expr: "lookup(`[\"item0\"]`, `5`)", want: "null"},
		{expr: "items(`{\"key1\": \"value1\", \"key2\": \"value2\"}`, 'myKey', 'myValue')", want: `[{"myKey": "key1", "myValue": "value1"}, {"myKey": "key2", "myValue": "value2"}]`},
		{expr: "items(`[\"A\", \"B\"]`, 'myKey', 'myValue')", want: `[{"myKey": 0, "myValue": "A"}, {"myKey": 1, "myValue": "B"}]`},
		{expr: "object_from_lists(`[\"key1\", \"key2\"]`, `[1]`)", want: `{"key1": 1, "key2": null}`},
		{expr: "sha256('hello')", want: `"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"`},
		{expr: "sha1('hello')", want: `"aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"`},
		{expr: "md5('hello')", want: `"5d41402abc4b2a76b9719d911017c592"`},
		{expr: "add(`12`, `13`)", want: "25"},
		{expr: "add('12Ki', '13Ki')", want: `"25Ki"`},
		{expr: "add('12Ki', '13')", want: `"12301"`},
		{expr: "add('12s', '13s')", want: `"25s"`},
		{expr: "add('12s', `13`)", wantErr: "JMESPath function 'add': Types mismatch"},
		{expr: "sum(['12Ki', '13Ki', '1Ki', '4Ki'])", want: `"30Ki"`},
		{expr: "sum(`[]`)", wantErr: "at least one element in the array is required"},
		{expr: "subtract('12Ki', '13Ki')", want: `"-1Ki"`},
		{expr: "multiply(`2.5`, '40s')", want: `"1m40s"`},
		{expr: "multiply('12Ki', `3`)", want: `"36Ki"`},
		{expr: "divide('12Ki', `3`)", want: `"4Ki"`},
		{expr: "divide('12Ki', '200')", want: "61.44"},
		{expr: "divide('12s', '5s')", want: "2.4"},
		{expr: "divide(`14`, `0`)", wantErr: "Zero divisor passed"},
		{expr: "modulo('12Ki', '5Ki')", want: `"2Ki"`},
		{expr: "modulo('13s', '2s')", want: `"1s"`},
		{expr: "modulo(`13`, `5`)", want: "3"},
		{expr: "modulo(`14`, `1.5`)", wantErr: "Non-integer argument(s) passed for modulo"},
		{expr: "time_since('', '2021-01-02T15:04:05-07:00', '2021-01-10T03:14:05-07:00')", want: `"180h10m0s"`},
		{expr: "time_since('Mon Jan _2 15:04:05 MST 2006', 'Mon Jan 02 15:04:05 MST 2021', 'Mon Jan 10 03:14:16 MST 2021')", want: `"180h10m11s"`},
		{expr: "time_since('', '2021-01-02T15:04:05-07:00', '')", wantErr: "reads the clock"},
		{expr: "time_to_cron(time_utc('2023-02-02T15:04:05-07:00'))", want: `"4 22 2 2 4"`},
		{expr: "time_add(time_parse('Mon Jan 02 15:04:05 -0700 2006', 'Sat Jan 02 15:04:05 -0700 2021'), '5h30m40s')", want: `"2021-01-02T20:34:45-07:00"`},
		{expr: "time_parse('1702691171', '1702691171')", want: `"2023-12-16T01:46:11Z"`},
		{expr: "time_diff('2021-01-02T15:04:05-07:00', '2021-01-10T03:14:05-07:00')", want: `"180h10m0s"`},
		{expr: "time_before('2023-01-01T00:00:00Z', '2023-01-02T00:00:00Z')", want: "true"},
		{expr: "time_after('2023-01-01T00:00:00Z', '2023-01-02T00:00:00Z')", want: "false"},
		{expr: "time_between('2023-01-02T00:00:00Z', '2023-01-01T00:00:00Z', '2023-01-03T00:00:00Z')", want: "true"},
		{expr: "time_truncate('2023-01-02T15:04:05Z', '1h')", want: `"2023-01-02T15:00:00Z"`},
		{expr: "time_now()", wantErr: "unknown function: time_now"},
		{expr: "random('[0-9]{4}')", wantErr: "unknown function: random"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			// A multiselect list ([…]) over null is null: the data is an
			// object, as Kyverno's tests search one.
			var data any = map[string]any{}
			if tt.data != "" {
				if err := json.Unmarshal([]byte(tt.data), &data); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Search(tt.expr, data)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g, w := asJSON(t, got), asJSON(t, jsonValue(t, tt.want)); !reflect.DeepEqual(g, w) {
				t.Errorf("got %s, want %s", mustJSON(t, got), tt.want)
			}
		})
	}
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// asJSON is v as JSON reads it back, so that Kyverno's ints and float64s
// compare alike.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	return jsonValue(t, mustJSON(t, v))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
