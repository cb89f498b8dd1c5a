package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunValidatesGlobalContextFlags: a bound on the entries that serves
// none is refused before Sprout connects.
func TestRunValidatesGlobalContextFlags(t *testing.T) {
	kubeconfig := unreachableKubeconfig(t, freeAddress(t))
	bin := sproutBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "run", "--kubeconfig", kubeconfig, "--health-probe-bind-address", "0",
		"--metrics-bind-address", "0", "--global-context-max-entries", "0").CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("sprout run is still running after 30s, with the API server down:\n%s", out)
	}
	if want := "--global-context-max-entries 0: want at least 1"; err == nil || !strings.Contains(string(out), want) {
		t.Errorf("sprout run: %v, want an error containing %q:\n%s", err, want, out)
	}
}
