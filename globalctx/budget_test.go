package globalctx

import (
	"runtime"
	"strings"
	"testing"
)

// TestParseYAMLCountsAliasesInBytes: parse_yaml refuses a text whose
// aliases name a long string thousands of times, before expanding it.
// Before, the 196 KiB text below became 2 GB of values.
func TestParseYAMLCountsAliasesInBytes(t *testing.T) {
	aliases := strings.Repeat("- *s\n", 16384)
	text := "- &s " + strings.Repeat("x", 196<<10-len(aliases)-len("- &s \n")) + "\n" + aliases
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Search("parse_yaml(text)", map[string]any{"text": text})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "parse_yaml: its aliases expand it to more than 4194304 bytes, the limit") {
		t.Fatalf("want parse_yaml refused, got %.300v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Fatalf("parse_yaml allocated %d MiB", alloc>>20)
	}
}
