// Package yamlbudget bounds, in bytes, what a YAML document may expand to
// through its aliases, before anything expands it.
//
// A YAML decoder builds a value for every alias, a copy of what its anchor
// names; converting to JSON copies each one again. A few hundred KiB of
// text can therefore stand for gigabytes of values, and the decoders' own
// guards count nodes, not bytes: an anchor naming a long string, named a
// few thousand times, passes them. Every decoder of YAML text in Sprout
// (yaml.parse, templates, policy files, trigger and test files) asks this
// package first, each with its own limit.
//
// The count is made on the node tree go.yaml.in/yaml/v3 parses, which holds
// every alias as a pointer to its anchor: nothing is expanded. Each anchor's
// size is counted once and remembered, so counting takes time linear in the
// text however the aliases nest, and it stops as soon as the limit is
// passed. Text with no alias is not parsed at all.
package yamlbudget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// NodeBytes is what one value costs beside the bytes of its text: Go holds
// each value decoded from YAML behind an interface and a header (a string,
// a slice, a map entry), which is what a value of a few bytes really costs.
// It also makes the byte limit a bound on the number of values.
const NodeBytes = 24

// maxDepth bounds the nesting the counter walks. The parser refuses flow
// and block nesting deeper than 10,000 each, so a tree it returns is less
// deep than this; the bound keeps the walk safe from a parser that would
// not.
const maxDepth = 25_000

// Error is a document refused for what its aliases expand it to.
type Error struct {
	// Limit is the most the document may expand to, in bytes.
	Limit int64
	// Path is where in the document the count went past Limit: the
	// expanded document's keys and indices, as in spec.items[12].
	Path string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("its aliases expand it to more than %d bytes, the limit", e.Limit)
	if e.Path != "" {
		msg += "; the count passed it at " + e.Path
	}
	return msg
}

// Check refuses the first document of text if its aliases expand it past
// limit bytes, counted as Size counts them; yaml.Unmarshal reads that
// document too. Text without an alias returns at once.
func Check(text []byte, limit int64) error {
	if !MayHaveAliases(text) {
		return nil
	}
	return check(text, limit)
}

// CheckString is Check of a string, without copying it when it has no
// alias.
func CheckString(text string, limit int64) error {
	if !StringMayHaveAliases(text) {
		return nil
	}
	return check([]byte(text), limit)
}

func check(text []byte, limit int64) error {
	if isJSONStream(text) {
		// JSON has no aliases: what looked like one is inside a string.
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		// The decoders that follow are not this parser: what it cannot
		// read, one of them may read, aliases and all, uncounted.
		return fmt.Errorf("its aliases cannot be counted: %w", err)
	}
	return CheckNode(&doc, limit)
}

// CheckNode refuses the tree under n if its aliases expand it past limit
// bytes.
func CheckNode(n *yaml.Node, limit int64) error {
	_, err := Size(n, limit)
	return err
}

// Size is what the tree under n takes once every alias is replaced by what
// it names: for each value NodeBytes, and for a scalar (a mapping's key
// too) the bytes of its text besides. A merge key (<<: *a) counts as its
// alias does, the mapping it merges in whole. Past limit it stops and
// returns an *Error; an alias inside its own anchor, which no decoder can
// expand, is an error too.
func Size(n *yaml.Node, limit int64) (int64, error) {
	c := counter{limit: limit, done: map[*yaml.Node]int64{}, open: map[*yaml.Node]bool{}}
	size, err := c.size(n, 0)
	if over := (*Error)(nil); errors.As(err, &over) {
		over.Path = strings.TrimPrefix(over.Path, ".")
	} else if err != nil {
		err = fmt.Errorf("its aliases cannot be counted: %w", err)
	}
	return size, err
}

type counter struct {
	limit int64
	// done holds the size of every anchored node counted; open those being
	// counted, which an alias inside them names.
	done map[*yaml.Node]int64
	open map[*yaml.Node]bool
}

func (c *counter) size(n *yaml.Node, depth int) (int64, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 0, fmt.Errorf("line %d: the alias *%s names no anchor", n.Line, n.Value)
		}
		n = n.Alias
	}
	if n.Anchor != "" {
		if size, ok := c.done[n]; ok {
			return size, nil
		}
		if c.open[n] {
			return 0, fmt.Errorf("line %d: the anchor &%s contains an alias of itself", n.Line, n.Anchor)
		}
		c.open[n] = true
	}
	if depth > maxDepth {
		return 0, fmt.Errorf("line %d: nested more than %d deep", n.Line, maxDepth)
	}
	size := NodeBytes + int64(len(n.Value))
	for i, child := range n.Content {
		s, err := c.size(child, depth+1)
		if err != nil {
			return 0, at(err, n, i)
		}
		// Each term is at most limit, so the sum cannot overflow.
		if size += s; size > c.limit {
			return 0, at(&Error{Limit: c.limit}, n, i)
		}
	}
	if n.Anchor != "" {
		delete(c.open, n)
		c.done[n] = size
	}
	return size, nil
}

// at prefixes the path of an *Error with the place of the i-th node of
// parent's content: an index in a sequence, a key in a mapping.
func at(err error, parent *yaml.Node, i int) error {
	var over *Error
	if !errors.As(err, &over) {
		return err
	}
	switch parent.Kind {
	case yaml.SequenceNode:
		over.Path = "[" + strconv.Itoa(i) + "]" + over.Path
	case yaml.MappingNode:
		k := parent.Content[i-i%2]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		switch {
		case k.Kind != yaml.ScalarNode:
			over.Path = "[?]" + over.Path
		case plainKey.MatchString(k.Value):
			over.Path = "." + k.Value + over.Path
		default:
			over.Path = "[" + strconv.Quote(k.Value) + "]" + over.Path
		}
	}
	return over
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_<-][A-Za-z0-9_<-]*$`)

// MayHaveAliases reports whether text may hold an alias: the parsers read
// one only as '*' followed by a letter, a digit, '_' or '-', so text
// without that pair has none, whatever else it holds. Text in UTF-16,
// which the parsers read after its byte order mark, is assumed to have
// some.
func MayHaveAliases(text []byte) bool {
	if bytes.HasPrefix(text, []byte{0xfe, 0xff}) || bytes.HasPrefix(text, []byte{0xff, 0xfe}) {
		return true
	}
	for {
		i := bytes.IndexByte(text, '*')
		if i < 0 || i+1 >= len(text) {
			return false
		}
		if isAnchorByte(text[i+1]) {
			return true
		}
		text = text[i+1:]
	}
}

// StringMayHaveAliases is MayHaveAliases of a string.
func StringMayHaveAliases(text string) bool {
	if strings.HasPrefix(text, "\xfe\xff") || strings.HasPrefix(text, "\xff\xfe") {
		return true
	}
	for {
		i := strings.IndexByte(text, '*')
		if i < 0 || i+1 >= len(text) {
			return false
		}
		if isAnchorByte(text[i+1]) {
			return true
		}
		text = text[i+1:]
	}
}

// isAnchorByte reports whether b may be part of an anchor's name, as the
// YAML parsers of go.yaml.in read one.
func isAnchorByte(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b == '_' || b == '-'
}

// isJSONStream reports whether text is one or more JSON values and nothing
// else, read without building them.
func isJSONStream(text []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(text))
	for n := 0; ; n++ {
		var skip struct{}
		err := dec.Decode(&skip)
		var mismatch *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return n > 0
		case err == nil, errors.As(err, &mismatch):
			// A value that is not an object is read whole all the same.
		default:
			return false
		}
	}
}

// ForText is the limit of a document of n bytes read from a file whose
// own size is bounded more loosely than a policy's: four times its text,
// and at least 4 MiB, so a document's aliases may make it a few times
// larger, never hundreds of times.
func ForText(n int) int64 {
	return max(4<<20, 4*int64(n))
}
