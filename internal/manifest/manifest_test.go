package manifest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestParseCountsAliasesInBytes: a trigger or context file whose aliases
// expand a document to gigabytes is refused before it is expanded, naming
// the document, the limit and where the count passed it; Parse allocates
// a few MiB. Before, the 532 KB file below took gigabytes.
func TestParseCountsAliasesInBytes(t *testing.T) {
	bomb := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n  big: &big " + strings.Repeat("x", 512<<10) + "\n" +
		"  copies: [" + strings.TrimSuffix(strings.Repeat("*big, ", 2000), ", ") + "]\n"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse([]byte(bomb))
	runtime.ReadMemStats(&after)
	want := fmt.Sprintf("document 1: its aliases expand it to more than %d bytes, the limit; the count passed it at data.copies[7]", 4<<20)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %q, got %.300v", want, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("Parse allocated %d MiB", alloc>>20)
	}
}

// TestParseTakesWhatHasNoAliases: aliases within the limit expand; JSON
// whose strings hold what looks like an alias, one object after another,
// is read as before.
func TestParseTakesWhatHasNoAliases(t *testing.T) {
	for name, tc := range map[string]struct {
		text  string
		names string
	}{
		"aliases":     {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, labels: &l {x: z}}\ndata: {l: *l}\n", "a,b"},
		"JSON stream": {`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"p": "*x"}}` + "\n" + `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}`, "a,b"},
	} {
		objs, err := Parse([]byte(tc.text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, o.GetName())
		}
		if strings.Join(names, ",") != tc.names {
			t.Fatalf("%s: %v, want %s", name, names, tc.names)
		}
	}
}
