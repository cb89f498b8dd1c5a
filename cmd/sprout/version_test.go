package main

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFromBuild: a release binary reports what -ldflags set, a
// binary built in a checkout reports its commit and commit time, and only
// a build with neither, as `go run` makes, says devel.
func TestVersionFromBuild(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "sprout")
	out, err := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X main.version=v9.8.7 -X main.commit=abc1234 -X main.date=2026-01-02T03:04:05Z", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("sprout version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "sprout v9.8.7 commit abc1234 built 2026-01-02T03:04:05Z"; got != want {
		t.Errorf("sprout version = %q, want %q", got, want)
	}
}

func TestDescribeBuild(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main: debug.Module{Version: "v0.0.0-20261125170000-0123456789ab"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-11-25T17:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name           string
		info           *debug.BuildInfo
		ver, rev, date string
		want           string
	}{
		{"go run", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "", "", "devel"},
		{"no build info", nil, "", "", "", "devel"},
		{"go build in a checkout", stamped, "", "", "",
			"v0.0.0-20261125170000-0123456789ab commit 0123456789abcdef-dirty built 2026-11-25T17:00:00Z"},
		{"ldflags win", stamped, "v1.2.3", "fedcba", "2026-12-01T00:00:00Z",
			"v1.2.3 commit fedcba built 2026-12-01T00:00:00Z"},
		{"ldflags version only", stamped, "v1.2.3", "", "",
			"v1.2.3 commit 0123456789abcdef-dirty built 2026-11-25T17:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describeBuild(tt.info, tt.ver, tt.rev, tt.date).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
