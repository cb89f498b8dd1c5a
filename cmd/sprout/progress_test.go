package main

import (
	"bytes"
	"testing"
	"time"
)

// TestProgressWanted: progress is drawn only on a terminal, never in a pipe
// or a file, in CI, or on a terminal that cannot return to a line's start.
func TestProgressWanted(t *testing.T) {
	for _, c := range []struct {
		terminal bool
		env      map[string]string
		want     bool
	}{
		{true, map[string]string{"TERM": "xterm-256color"}, true},
		{true, nil, true},
		{true, map[string]string{"CI": "false"}, true},
		{false, map[string]string{"TERM": "xterm"}, false},
		{true, map[string]string{"CI": "true"}, false},
		{true, map[string]string{"CI": "woodpecker"}, false},
		{true, map[string]string{"TERM": "dumb"}, false},
	} {
		if got := progressWanted(c.terminal, func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("progressWanted(%v, %v) = %v, want %v", c.terminal, c.env, got, c.want)
		}
	}
}

// TestProgressLine: the line is redrawn in place at most every interval
// (a new phase at once), and erased before any other line is written, so
// logs and the summary never run on from it.
func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, on: true, every: time.Hour}
	p.set("render: policy 1 of 3")
	p.set("render: policy 2 of 3") // within the interval: not drawn
	p.show("diff: planning 3 policies")
	_, _ = p.Write([]byte("level=ERROR msg=x\n"))
	p.set("render: policy 3 of 3") // erased before: drawn again
	p.done()
	_, _ = p.Write([]byte("render: 3 policies\n"))
	const erase = "\r\x1b[K"
	want := erase + "render: policy 1 of 3" + erase + "diff: planning 3 policies" + erase + "level=ERROR msg=x\n" +
		erase + "render: policy 3 of 3" + erase + "render: 3 policies\n"
	if got := buf.String(); got != want {
		t.Errorf("the terminal got\n%q\nwant\n%q", got, want)
	}

	buf.Reset()
	off := &progress{w: &buf, every: time.Hour}
	off.show("diff: planning 3 policies")
	_, _ = off.Write([]byte("render: 3 policies\n"))
	off.done()
	if got := buf.String(); got != "render: 3 policies\n" {
		t.Errorf("off a terminal: %q", got)
	}
}
