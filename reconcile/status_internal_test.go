package reconcile

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBoundedMessage: a message of many joined errors is cut below what a
// CRD accepts, at a rune boundary, saying so; a short one is kept whole.
func TestBoundedMessage(t *testing.T) {
	short := "trigger ConfigMap a/b: spec.generate[0].expression: no such key"
	if got := boundedMessage(short); got != short {
		t.Errorf("a short message changed: %q", got)
	}
	long := strings.Repeat("trigger ConfigMap ünïcode/ñame: no such key\n", 2000)
	got := boundedMessage(long)
	if len(got) > maxConditionMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "Sprout's log)") {
		t.Errorf("cut message: %d bytes, valid UTF-8 %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-40:])
	}
}
