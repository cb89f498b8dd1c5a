package main

import (
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunValidatesFlagsBeforeConnecting: a bad --resync-schedule, and every
// other flag checked without a cluster, fails `sprout run` at once naming
// the flag, even with the API server down; a bad schedule used to be
// reported only after the caches had synced, so never with a server down.
func TestRunValidatesFlagsBeforeConnecting(t *testing.T) {
	kubeconfig := unreachableKubeconfig(t, freeAddress(t))
	bin := sproutBinary(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--resync-schedule", "every ten minutes"}, `--resync-schedule "every ten minutes"`},
		{[]string{"--allowed-kinds", ".apps"}, `--allowed-kinds: ".apps"`},
		{[]string{"--poll-interval", "0s"}, "--poll-interval 0s"},
		{[]string{"--http-allowed-hosts", "https://api.example.com"}, `--http-allowed-hosts: allowed hosts[0] "https://api.example.com"`},
		{[]string{"--http-allowed-hosts", "api.example.com", "--http-timeout", "0s"}, "--http-timeout 0s: want more than 0"},
		{[]string{"--metrics-bind-address", "8080"}, `--metrics-bind-address "8080"`},
		{[]string{"--tenant-cpu-share", "-0.5"}, "--tenant-cpu-share: -0.5 is not a share of a processor"},
		{[]string{"--leader-elect", "--leader-elect-renew-deadline", "20s"}, "--leader-elect-lease-duration (15s) must exceed --leader-elect-renew-deadline (20s)"},
	} {
		t.Run(tt.args[len(tt.args)-2], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"run", "--kubeconfig", kubeconfig, "--health-probe-bind-address", "0", "--metrics-bind-address", "0"}, tt.args...)
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("sprout run %v is still running after 30s, with the API server down:\n%s", tt.args, out)
			}
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("sprout run %v: %v, want an error containing %q:\n%s", tt.args, err, tt.want, out)
			}
		})
	}
}

// TestRunSaysWhatItWaitsFor: `sprout run` with the API server down says, at
// the default log level, that it waits for the API server, and says so again
// at each retry; a SIGTERM then ends it cleanly, without an error and
// without starting what follows.
func TestRunSaysWhatItWaitsFor(t *testing.T) {
	addr := freeAddress(t)
	p := startProcess(t, unreachableKubeconfig(t, addr))
	eventually(t, "two tries logged", func(context.Context) bool {
		return strings.Count(p.logs.String(), `msg="waiting for the API server"`) >= 2
	})
	logs := p.logs.String()
	if !strings.Contains(logs, addr) || !strings.Contains(logs, "retry_in=") {
		t.Errorf("the log does not name the server and the next try:\n%s", logs)
	}
	if err := p.stop(t, 30*time.Second); err != nil {
		t.Errorf("sprout run stopped while waiting: %v\n%s", err, p.logs.String())
	}
	if strings.Contains(p.logs.String(), "level=ERROR") {
		t.Errorf("a shutdown logged an error:\n%s", p.logs.String())
	}
	// Stopped while waiting, it starts nothing after.
	if strings.Contains(p.logs.String(), "waiting for the PolicyInventory records") {
		t.Errorf("a stop while it waited for the API server started the controller:\n%s", p.logs.String())
	}
}

// TestShutdownDuringAGitCheckIsNoError: a SIGTERM while a Git check is under
// way (a remote that accepts the connection and never answers) ends
// `sprout run` without logging "source revision rejected ... context
// canceled" at level ERROR, as `make run ARGS=--once` used to at its end.
func TestShutdownDuringAGitCheckIsNoError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	t.Cleanup(func() {
		for {
			select {
			case c := <-accepted:
				_ = c.Close()
			default:
				return
			}
		}
	})
	cp := startControlPlane(t)
	p := startProcess(t, writeKubeconfig(t, cp), "--cluster-policies=false",
		"--git-url", "http://"+ln.Addr().String()+"/platform.git", "--git-timeout", "10m")
	eventually(t, "the Git check under way", func(context.Context) bool { return len(accepted) > 0 })
	if err := p.stop(t, 30*time.Second); err != nil {
		t.Errorf("sprout run: %v\n%s", err, p.logs.String())
	}
	if logs := p.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("a shutdown logged an error:\n%s", logs)
	}
}

// TestRunRetriesASilentAPIServer: a server that accepts connections and
// never answers (a proxy in front of a dead one) is waited for visibly too:
// each try is bounded even without --request-timeout. The first try used
// to wait for ever, saying nothing after "sprout starting".
func TestRunRetriesASilentAPIServer(t *testing.T) {
	addr := silentServer(t)
	p := startProcess(t, unreachableKubeconfig(t, addr))
	eventually(t, "a try logged", func(context.Context) bool {
		return strings.Contains(p.logs.String(), `msg="waiting for the API server"`)
	})
	if logs := p.logs.String(); !strings.Contains(logs, addr) {
		t.Errorf("the log does not name the server:\n%s", logs)
	}
	if err := p.stop(t, 30*time.Second); err != nil {
		t.Errorf("sprout run stopped while waiting: %v\n%s", err, p.logs.String())
	}
}

// TestInventoryGivesUpAfterRequestTimeout: --request-timeout bounds
// `sprout inventory` as it bounds diff, against a server that never answers.
func TestInventoryGivesUpAfterRequestTimeout(t *testing.T) {
	addr := silentServer(t)
	done := make(chan error, 1)
	go func() {
		root := newRootCommand()
		root.SetArgs([]string{"inventory", "--kubeconfig", unreachableKubeconfig(t, addr), "--request-timeout", "500ms"})
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		done <- root.ExecuteContext(context.Background())
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "exceeded") {
			t.Errorf("sprout inventory against %s: %v, want an error naming it and the timeout", addr, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sprout inventory --request-timeout 500ms still waits after 30 s")
	}
}
