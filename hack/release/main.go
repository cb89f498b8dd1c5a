// Command release assembles a Sprout release, for `make release`: in a
// folder that already holds the static binaries the Makefile cross-compiled
// (sprout-linux-amd64, sprout-linux-arm64), it writes the install manifests
// (deploy/ rendered by kustomize with the image pinned to the version), the
// image as an OCI image layout tarball built without Docker, and SHA256SUMS
// over all of them. It owns no build flags, which stay in the Makefile, and
// it pushes nothing: publishing is a separate, deliberate step.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// repository is where the image is published; install.yaml names it.
const repository = "ghcr.io/sprout-gitops/sprout"

// arches are the platforms a release ships, all linux.
var arches = []string{"amd64", "arm64"}

// versionPattern is semantic versioning with a v, as tags and image tags
// take it: no build metadata, which an image tag cannot hold ("+").
var versionPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// release is what one run assembles.
type release struct {
	Version string
	Commit  string
	Date    time.Time
	Dist    string // the folder of the binaries and the artifacts
	Deploy  string // the kustomize base, deploy/
}

// binary is the file name of a platform's binary in Dist.
func binary(arch string) string { return "sprout-linux-" + arch }

// ociTarball is the file name of the image in Dist.
func (r release) ociTarball() string { return "sprout-" + r.Version + "-oci.tar" }

// image is the reference the install manifests pin.
func (r release) image() string { return repository + ":" + r.Version }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	version := fs.String("version", "", "the version to release, vMAJOR.MINOR.PATCH[-PRERELEASE]")
	check := fs.Bool("check", false, "only check -version, before anything is built")
	commit := fs.String("commit", "", "the Git commit the binaries were built from")
	date := fs.String("date", "", "the build date the binaries carry, RFC 3339")
	dist := fs.String("dist", "dist", "the folder of the binaries, where the artifacts are written")
	deploy := fs.String("deploy", "deploy", "the kustomize base to render")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkVersion(*version); err != nil {
		return err
	}
	if *check {
		return nil
	}
	if *commit == "" {
		return errors.New("-commit: missing: the release names the commit it was built from")
	}
	built, err := time.Parse(time.RFC3339, *date)
	if err != nil {
		return fmt.Errorf("-date: %w", err)
	}
	r := release{Version: *version, Commit: *commit, Date: built.UTC(), Dist: *dist, Deploy: *deploy}
	return r.assemble()
}

// checkVersion refuses what is not a version a tag and an image can carry.
func checkVersion(v string) error {
	if v == "" {
		return errors.New("VERSION is missing: make release VERSION=vMAJOR.MINOR.PATCH, e.g. VERSION=v0.1.0")
	}
	if !versionPattern.MatchString(v) {
		return fmt.Errorf("VERSION %q is not vMAJOR.MINOR.PATCH with an optional -PRERELEASE, e.g. v0.1.0 or v0.2.0-rc.1", v)
	}
	return nil
}

// assemble writes every artifact, the checksums last, over what it wrote.
func (r release) assemble() error {
	var written []string
	for _, arch := range arches {
		if _, err := os.Stat(filepath.Join(r.Dist, binary(arch))); err != nil {
			return fmt.Errorf("binary for linux/%s: %w", arch, err)
		}
		written = append(written, binary(arch))
	}
	manifests, err := r.writeManifests()
	if err != nil {
		return err
	}
	written = append(written, manifests...)
	if err := r.writeImage(); err != nil {
		return fmt.Errorf("image %s: %w", r.ociTarball(), err)
	}
	written = append(written, r.ociTarball())
	return writeChecksums(r.Dist, written)
}
