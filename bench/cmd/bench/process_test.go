package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLogWatchSeesOnlyNewWholeLines: a message in the log before the watch
// began is not seen, nor one whose line is still being written; it is once
// the line ends.
func TestLogWatchSeesOnlyNewWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	appendTo := func(s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendTo("msg=\"resync: begin\"\n")
	w := newLogWatch(path, "resync: begin")
	if w.seen() {
		t.Fatal("a line written before the watch began was seen")
	}
	appendTo("msg=other\nmsg=\"resync: be")
	if w.seen() {
		t.Fatal("seen in a line not yet ended, or in another line")
	}
	appendTo("gin\"\n")
	if !w.seen() {
		t.Fatal("a line split across two reads was not seen")
	}
}
