package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: what render writes to the second file
// arrives, as a terminal shows it, on the first.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// renderTo runs `sprout render` with its standard error on w, closes w and
// returns what r read of it.
func renderTo(t *testing.T, r, w *os.File) string {
	t.Helper()
	read := make(chan string, 1)
	go func() {
		var b strings.Builder
		_, err := io.Copy(&b, r)
		if err != nil && !errors.Is(err, syscall.EIO) { // EIO: the terminal's last writer closed
			t.Error(err)
		}
		read <- b.String()
	}()
	root := newRootCommand()
	root.SetArgs([]string{"render", "-p", "../../fixtures/zk-kafka-address/policy.yaml", "-r", "../../fixtures/zk-kafka-address/triggers.yaml"})
	root.SetOut(io.Discard)
	root.SetErr(w)
	err := root.ExecuteContext(context.Background())
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return <-read
}

// TestRenderProgressOnATerminalOnly: on a terminal, render shows how far it
// has got and erases it before its summary; into a pipe, or in CI, the
// summary is all it writes to standard error.
func TestRenderProgressOnATerminalOnly(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv("TERM", "xterm")
	const summary = "render: 1 policy, 2 triggers, 1 object, 0 errors"
	master, slave := openPTY(t)
	got := renderTo(t, master, slave)
	if want := "\r\x1b[Krender: policy 1 of 1, objects: 1\r\x1b[K" + summary + "\r\n"; got != want {
		t.Errorf("on a terminal, standard error shows\n%q\nwant\n%q", got, want)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if got := renderTo(t, r, w); got != summary+"\n" {
		t.Errorf("into a pipe, standard error holds %q, want the summary alone", got)
	}

	t.Setenv("CI", "true")
	master, slave = openPTY(t)
	if got := renderTo(t, master, slave); got != summary+"\r\n" {
		t.Errorf("in CI, standard error shows %q, want the summary alone", got)
	}
}

// TestDiffProgressOnATerminal: on a terminal, diff says how many policies
// it has read, then that it plans them, and erases that before its summary.
func TestDiffProgressOnATerminal(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv("TERM", "xterm")
	cp := startControlPlane(t)
	master, slave := openPTY(t)
	read := make(chan string, 1)
	go func() {
		var b strings.Builder
		_, _ = io.Copy(&b, master) // ends with EIO once the terminal's last writer closed
		read <- b.String()
	}()
	root := newRootCommand()
	root.SetArgs([]string{"diff", "--kubeconfig", writeKubeconfig(t, cp), "--policy-dir", "testdata/diff-names/policies", "welcome"})
	root.SetOut(io.Discard)
	root.SetErr(slave)
	err := root.ExecuteContext(context.Background())
	_ = slave.Close()
	got := <-read
	if err != nil {
		t.Fatalf("sprout diff: %v\n%q", err, got)
	}
	const erase = "\r\x1b[K"
	reading, planning := strings.Index(got, erase+"diff: reading policies: 1"), strings.Index(got, erase+"diff: planning 1 policy")
	if reading < 0 || planning < reading || !strings.HasSuffix(got, erase+"diff: 1 policy, 0 triggers, 0 objects, 0 errors: 0 to create, 0 to change, 0 to delete\r\n") {
		t.Errorf("standard error on a terminal:\n%q", got)
	}
}
