package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress keeps one status line at the bottom of a terminal while a long
// render or diff works, redrawn in place and erased before anything else is
// written there. Anywhere but a terminal (a pipe, a file, CI) it draws
// nothing, so what scripts read is never mixed with it.
type progress struct {
	w     io.Writer
	on    bool
	every time.Duration // the least time between two redraws by set

	mu    sync.Mutex
	last  time.Time
	shown bool
}

// newProgress returns the progress line of a command whose standard error
// is w.
func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	terminal := ok && term.IsTerminal(int(f.Fd()))
	return &progress{w: w, on: progressWanted(terminal, os.Getenv), every: 100 * time.Millisecond}
}

// progressWanted decides whether a command draws progress: only for a
// person at a terminal that can return to the start of a line, and not in
// CI, whose runners may give a terminal to a log nobody watches.
func progressWanted(terminal bool, getenv func(string) string) bool {
	ci := getenv("CI")
	return terminal && getenv("TERM") != "dumb" && (ci == "" || ci == "false" || ci == "0")
}

// set shows the line unless it was drawn less than p.every ago: a render
// of many policies must not spend its time drawing, nor formatting lines
// nobody sees.
func (p *progress) set(format string, args ...any) { p.draw(false, format, args) }

// show shows the line now: a new phase of the work.
func (p *progress) show(format string, args ...any) { p.draw(true, format, args) }

func (p *progress) draw(now bool, format string, args []any) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := time.Now()
	if !now && p.shown && t.Sub(p.last) < p.every {
		return
	}
	p.last, p.shown = t, true
	_, _ = fmt.Fprintf(p.w, "\r\x1b[K"+format, args...)
}

// Write erases the status line, then writes b: log lines and the summary
// go through it, so they are never appended to the line.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eraseLocked()
	return p.w.Write(b)
}

// done erases the status line for good.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eraseLocked()
}

func (p *progress) eraseLocked() {
	if p.shown {
		_, _ = io.WriteString(p.w, "\r\x1b[K")
		p.shown = false
	}
}
