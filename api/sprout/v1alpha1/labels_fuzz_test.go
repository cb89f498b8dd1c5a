package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzLabelValue checks what docs/labels.md promises of LabelValue for any
// two names: the result is a label value, the same every time; a valid value
// is written unchanged; any other is the documented readable prefix, a dash
// and the first 16 hex digits of the SHA-256 of the whole value; and two names
// never share a label value, unless one of them is a valid value that
// happens to equal the other's encoding. There is no decoding to check: the
// exact name is in the sprout.dev/policy annotation, not in the label.
func FuzzLabelValue(f *testing.F) {
	long := strings.Repeat("a", 100)
	for _, seed := range [][2]string{
		{"team-red", "team-blue"},
		{"", "-"},
		{strings.Repeat("b", 63), strings.Repeat("b", 64)},
		{long, long + "b"},
		{strings.Repeat("c", 45) + "." + long, strings.Repeat("c", 45) + "-" + long},
		{strings.Repeat(".", 70), strings.Repeat("_", 70)},
		{"apps.example.com", "my.long.group." + long + ".example.com"},
		{"system:aggregate-to-admin", "system:aggregate-to-edit"},
		{"ünïcödé", "名前"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got := checkLabelValue(t, a)
		if other := checkLabelValue(t, b); a != b && got == other && got != a && other != b {
			t.Fatalf("%q and %q both encode to %q", a, b, got)
		}
	})
}

// checkLabelValue checks LabelValue(s) against docs/labels.md and returns it.
func checkLabelValue(t *testing.T, s string) string {
	t.Helper()
	got := LabelValue(s)
	if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
		t.Fatalf("LabelValue(%q) = %q is not a label value: %v", s, got, errs)
	}
	if again := LabelValue(s); again != got {
		t.Fatalf("LabelValue(%q) is %q, then %q", s, got, again)
	}
	if len(validation.IsValidLabelValue(s)) == 0 {
		if got != s {
			t.Fatalf("LabelValue(%q) = %q: a valid value must be kept", s, got)
		}
		return got
	}
	sum := sha256.Sum256([]byte(s))
	hash := hex.EncodeToString(sum[:])[:hashLength]
	prefix, ok := strings.CutSuffix(got, hash)
	if !ok {
		t.Fatalf("LabelValue(%q) = %q does not end in %s", s, got, hash)
	}
	if prefix, ok = strings.CutSuffix(prefix, "-"); !ok && prefix != "" {
		t.Fatalf("LabelValue(%q) = %q: no dash before the hash", s, got)
	}
	if want := readablePrefix(s); prefix != want {
		t.Fatalf("LabelValue(%q) = %q: prefix %q, want %q", s, got, prefix, want)
	}
	return got
}

// readablePrefix is the prefix docs/labels.md describes: the first 46
// characters (bytes), each one a label value cannot hold made a dash, trimmed
// to start and end in a letter or digit.
func readablePrefix(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && i < 46; i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-_.")
}
