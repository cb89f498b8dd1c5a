package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// A release build sets these with -ldflags "-X main.version=v0.1.0
// -X main.commit=... -X main.date=...": a binary built outside a checkout
// (in an image, from a tarball) has no VCS stamp to read them from.
var (
	version string
	commit  string
	date    string
)

// buildInfo is what `sprout version` reports.
type buildInfo struct {
	Version string
	Commit  string
	Date    string
}

func (b buildInfo) String() string {
	s := b.Version
	if b.Commit != "" {
		s += " commit " + b.Commit
	}
	if b.Date != "" {
		s += " built " + b.Date
	}
	return s
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date of sprout",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "sprout", currentBuild())
		},
	}
}

// currentBuild reads the running binary's version.
func currentBuild() buildInfo {
	info, _ := debug.ReadBuildInfo()
	return describeBuild(info, version, commit, date)
}

// describeBuild prefers what -ldflags set, then what the go command stamped:
// the module version (a tag, or a pseudo-version when built in a checkout)
// and the VCS revision and commit time. Only a build with neither, such as
// `go run`, is "devel".
func describeBuild(info *debug.BuildInfo, ver, rev, built string) buildInfo {
	b := buildInfo{Version: ver, Commit: rev, Date: built}
	if info == nil {
		info = &debug.BuildInfo{}
	}
	if v := info.Main.Version; b.Version == "" && v != "" && v != "(devel)" {
		b.Version = v
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if b.Commit == "" {
				b.Commit = s.Value
			}
		case "vcs.time":
			if b.Date == "" {
				b.Date = s.Value
			}
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev == "" && b.Commit != "" {
		b.Commit += "-dirty"
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}
