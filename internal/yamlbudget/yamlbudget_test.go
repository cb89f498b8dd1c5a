package yamlbudget

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf16"

	yaml "go.yaml.in/yaml/v3"
)

// allocated returns what fn allocated, garbage included.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// tenantBomb is the text a tenant handed yaml.parse: 196 KiB whose aliases
// name one long string 16,384 times, 16,386 values in all, fewer than the
// values a document of that size may have without aliases, and gigabytes
// once expanded.
func tenantBomb() string {
	aliases := strings.Repeat("- *s\n", 16384)
	return "- &s " + strings.Repeat("x", 196<<10-len(aliases)-len("- &s \n")) + "\n" + aliases
}

// policyBomb is a 532 KB policy file: a 512 KiB anchor named 2,000 times.
func policyBomb() string {
	return "apiVersion: policies.kyverno.io/v1\nkind: GeneratingPolicy\nmetadata:\n  name: bomb\n" +
		"  annotations:\n    big: &big " + strings.Repeat("x", 512<<10) + "\n" +
		"spec:\n  copies: [" + strings.TrimSuffix(strings.Repeat("*big, ", 2000), ", ") + "]\n"
}

// laughs nests n anchors, each a list of ten aliases of the one before:
// 10^n values from a few hundred bytes.
func laughs(n int) string {
	doc := "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	for i := 1; i <= n; i++ {
		doc += fmt.Sprintf("l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	return doc
}

// TestBombsAreRefusedBeforeTheyExpand: each document stands for far more
// than its limit once expanded, and is refused, naming the limit and where
// the count went past it, having allocated little more than its text's node
// tree.
func TestBombsAreRefusedBeforeTheyExpand(t *testing.T) {
	merge := "base: &b {k: " + strings.Repeat("x", 64<<10) + "}\nitems:\n" + strings.Repeat("- {<<: *b, n: 1}\n", 2000)
	nestedMerge := "m0: &m0 {k: " + strings.Repeat("x", 1000) + "}\n"
	for i := 1; i <= 30; i++ {
		nestedMerge += fmt.Sprintf("m%d: &m%d {<<: [*m%d], k%d: [*m%d, *m%d]}\n", i, i, i-1, i, i-1, i-1)
	}
	for _, tc := range []struct {
		name, doc string
		limit     int64
		path      string
	}{
		{"tenant's yaml.parse text", tenantBomb(), 3 << 20, "[26]"},
		{"policy file", policyBomb(), 4 << 20, "spec.copies[7]"},
		{"billion laughs", laughs(9), 3 << 20, "l4"},
		// 10^60 values: a count that is not memoized per anchor, or that
		// does not stop at the limit, never ends or overflows.
		{"sixty levels of laughs", laughs(60), 3 << 20, "l4"},
		{"merge keys", merge, 4 << 20, "items[63]"},
		{"nested merge keys", nestedMerge, 4 << 20, "m8.k8[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			alloc := allocated(func() { err = Check([]byte(tc.doc), tc.limit) })
			var over *Error
			if !errors.As(err, &over) || over.Limit != tc.limit {
				t.Fatalf("want an *Error with the limit %d, got %v", tc.limit, err)
			}
			if over.Path != tc.path || !strings.Contains(err.Error(), fmt.Sprintf("more than %d bytes, the limit; the count passed it at %s", tc.limit, tc.path)) {
				t.Errorf("want the path %s in the error, got %v", tc.path, err)
			}
			if bound := uint64(16<<20 + 4*len(tc.doc)); alloc > bound {
				t.Errorf("counting allocated %d bytes, more than %d", alloc, bound)
			}
		})
	}
}

// TestSizeIsTheExpandedDocument pins the measure: NodeBytes per value, and
// a scalar's bytes, an alias counting as what it names, a merge key as the
// mapping it merges.
func TestSizeIsTheExpandedDocument(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want int64
	}{
		// document, mapping, a, hello, b, hello again
		{"a: &x hello\nb: *x\n", 6*NodeBytes + 1 + 5 + 1 + 5},
		// document, mapping, a, mapping, k, v, b, mapping (<<, mapping, k, v)
		{"a: &m {k: v}\nb: {<<: *m}\n", 12*NodeBytes + 1 + 1 + 1 + 1 + 2 + 1 + 1},
		{"plain: text\n", 4*NodeBytes + 5 + 4},
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(tc.doc), &n); err != nil {
			t.Fatal(err)
		}
		if got, err := Size(&n, 1<<20); err != nil || got != tc.want {
			t.Errorf("Size(%q) = %d, %v; want %d", tc.doc, got, err, tc.want)
		}
	}
}

// TestDocumentsWithinTheirLimitPass: aliases that expand a document within
// its limit, text that only looks like it has aliases, and JSON, are
// accepted.
func TestDocumentsWithinTheirLimitPass(t *testing.T) {
	for name, doc := range map[string]string{
		"a few aliases":        "a: &a {k: v}\nb: *a\nc: [*a, *a]\n",
		"merge key":            "base: &b {k: v}\nitem: {<<: *b, n: 1}\n",
		"stars in strings":     "pattern: \"*foo\"\nexpr: a*b\nglob: '*.example.com'\n",
		"JSON with stars":      `{"resources": ["*"], "expression": "a*b", "pattern": "*foo"}`,
		"a stream of JSON":     `{"a": "*x"} {"b": "*y"} [1, 2]`,
		"a star at the end":    "a: *",
		"no alias, no parsing": strings.Repeat("- [unclosed\n", 10),
	} {
		if err := Check([]byte(doc), 1<<20); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := CheckString(doc, 1<<20); err != nil {
			t.Errorf("%s, as a string: %v", name, err)
		}
	}
}

// TestWhatCannotBeCountedIsRefused: a document the counter cannot read, or
// whose aliases no decoder can expand, is refused rather than handed on
// uncounted; nesting deeper than the parser reads is refused by it, not by
// a stack overflow.
func TestWhatCannotBeCountedIsRefused(t *testing.T) {
	for name, doc := range map[string]string{
		"unreadable":            "a: &a [x]\nb: *a\nc: \"unterminated\n",
		"alias inside itself":   "a: &a [1, *a]\n",
		"deep flow nesting":     "x: &x 1\ny: *x\nz: " + strings.Repeat("[", 100_000),
		"an alias of no anchor": "a: *nowhere\n",
	} {
		t.Run(name, func(t *testing.T) {
			err := Check([]byte(doc), 1<<20)
			if err == nil {
				t.Fatal("want an error")
			}
			t.Log(err)
		})
	}
}

// TestDeepNestingIsCounted: the deepest nesting the parser reads, an
// alias at its bottom, is counted.
func TestDeepNestingIsCounted(t *testing.T) {
	doc := "x: &x 1\nz: " + strings.Repeat("[", 9_999) + "*x" + strings.Repeat("]", 9_999) + "\n"
	if err := Check([]byte(doc), 1<<20); err != nil {
		t.Fatal(err)
	}
}

// TestUTF16TextIsCounted: the parsers read UTF-16 after its byte order
// mark, where '*' and a letter are not next to each other as bytes.
func TestUTF16TextIsCounted(t *testing.T) {
	text := []byte{0xff, 0xfe}
	for _, r := range utf16.Encode([]rune(tenantBomb())) {
		text = append(text, byte(r), byte(r>>8))
	}
	var over *Error
	if err := Check(text, 3<<20); !errors.As(err, &over) {
		t.Fatalf("want the UTF-16 bomb refused, got %v", err)
	}
}

// TestTextWithoutAliasesIsNotParsed: the fast path allocates nothing.
func TestTextWithoutAliasesIsNotParsed(t *testing.T) {
	doc := []byte(strings.Repeat("key: value with a * star and \"*\"\n", 10_000))
	short := string(doc[:1000])
	if n := testing.AllocsPerRun(10, func() {
		if err := Check(doc, 1); err != nil {
			t.Fatal(err)
		}
		if err := CheckString(short, 1); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func BenchmarkCheckWithoutAliases(b *testing.B) {
	doc := []byte(strings.Repeat("key: value with a * star and \"*\"\n", 10_000))
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if err := Check(doc, 1); err != nil {
			b.Fatal(err)
		}
	}
}
