package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/sprout-gitops/sprout/internal/manifest"
)

// testVersion is what the test releases: a pre-release, as a real one may be.
const testVersion = "v0.0.0-test.1"

// repoRoot is the checkout, from this package's folder.
const repoRoot = "../.."

// makeRelease runs `make release` in the checkout, as a maintainer does.
func makeRelease(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", repoRoot, "release"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// gitOutput is what git prints in the checkout, trimmed.
func gitOutput(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestMakeReleaseRefusesABadVersion: a missing or malformed VERSION stops
// `make release` before it builds anything, with a message that says what
// a version looks like.
func TestMakeReleaseRefusesABadVersion(t *testing.T) {
	for _, tc := range []struct{ name, arg, want string }{
		{"missing", "VERSION=", "VERSION is missing"},
		{"no v", "VERSION=0.1.0", `VERSION "0.1.0" is not vMAJOR.MINOR.PATCH`},
		{"no patch", "VERSION=v0.1", `VERSION "v0.1" is not vMAJOR.MINOR.PATCH`},
		{"build metadata", "VERSION=v0.1.0+abc", `VERSION "v0.1.0+abc" is not`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dist := t.TempDir()
			out, err := makeRelease(t, tc.arg, "DIST="+dist)
			if err == nil {
				t.Fatalf("make release %s succeeded:\n%s", tc.arg, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("make release %s says\n%s\nwant %q", tc.arg, out, tc.want)
			}
			if left, _ := os.ReadDir(dist); len(left) > 0 {
				t.Errorf("make release %s wrote %d files", tc.arg, len(left))
			}
		})
	}
}

// TestCheckVersion holds the versions a release takes: semantic versions
// with a v, pre-releases included, nothing an image tag cannot carry.
func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v0.1.0": true, "v1.22.333": true, "v0.2.0-rc.1": true, "v1.0.0-alpha-2.x": true,
		"": false, "0.1.0": false, "v0.1": false, "v01.1.0": false, "v0.1.0+meta": false,
		"v0.1.0-": false, "v0.1.0-rc..1": false, "v0.1.0 ": false, "latest": false,
	} {
		if err := checkVersion(v); (err == nil) != ok {
			t.Errorf("checkVersion(%q) = %v, want ok=%v", v, err, ok)
		}
	}
}

// TestReleaseArtifacts runs `make release` into a temporary folder and
// checks what a user downloads: both binaries, stamped and static, the
// checksums over every file, the install manifests pinned to the version,
// and the image for both platforms.
func TestReleaseArtifacts(t *testing.T) {
	dist := t.TempDir()
	if out, err := makeRelease(t, "VERSION="+testVersion, "DIST="+dist); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	t.Run("checksums", func(t *testing.T) { checkChecksums(t, dist) })
	t.Run("binaries", func(t *testing.T) { checkBinaries(t, dist) })
	t.Run("install manifests", func(t *testing.T) { checkManifests(t, dist) })
	t.Run("image", func(t *testing.T) { checkImage(t, dist) })
}

// checkChecksums: SHA256SUMS lists every file of the release, and each
// matches, as `sha256sum -c SHA256SUMS` checks.
func checkChecksums(t *testing.T, dist string) {
	data, err := os.ReadFile(filepath.Join(dist, checksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		sum, name, ok := strings.Cut(scanner.Text(), "  ")
		if !ok {
			t.Fatalf("%s: line %q is not sha256sum's DIGEST  NAME", checksumsFile, scanner.Text())
		}
		got, err := fileSHA256(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if got != sum {
			t.Errorf("%s: %s is %s, the file's SHA-256 is %s", checksumsFile, name, sum, got)
		}
		listed = append(listed, name)
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if e.Name() != checksumsFile {
			files = append(files, e.Name())
		}
	}
	want := []string{"install-without-policy-crds.yaml", "install.yaml", "sprout-" + testVersion + "-oci.tar", "sprout-linux-amd64", "sprout-linux-arm64"}
	slices.Sort(want)
	if !slices.Equal(listed, want) || !slices.Equal(files, want) {
		t.Errorf("%s lists %v, the folder holds %v; want %v", checksumsFile, listed, files, want)
	}
}

// checkBinaries: each binary is a static executable for its platform, and
// the one this machine runs reports the version, commit and date stamped.
func checkBinaries(t *testing.T, dist string) {
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, arch := range arches {
		f, err := elf.Open(filepath.Join(dist, binary(arch)))
		if err != nil {
			t.Fatalf("%s: %v", binary(arch), err)
		}
		if f.Machine != machines[arch] {
			t.Errorf("%s is for %v", binary(arch), f.Machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is linked dynamically", binary(arch))
			}
		}
		_ = f.Close()
	}
	if runtime.GOOS != "linux" {
		t.Skipf("no linux binary runs on %s", runtime.GOOS)
	}
	out, err := exec.Command(filepath.Join(dist, binary(runtime.GOARCH)), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", binary(runtime.GOARCH), err, out)
	}
	commit := gitOutput(t, "rev-parse", "HEAD")
	date := gitOutput(t, "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ")
	want := fmt.Sprintf(`^sprout %s commit %s(-dirty)? built %s\n$`, regexp.QuoteMeta(testVersion), commit, date)
	if !regexp.MustCompile(want).Match(out) {
		t.Errorf("sprout version prints %q, want %s", out, want)
	}
}

// checkManifests: each install manifest holds what kustomize builds from
// its folder of deploy/, object for object, but for the image, which names
// the release; install.yaml holds the CRDs, the RBAC and the Deployment.
func checkManifests(t *testing.T, dist string) {
	for _, m := range manifests {
		data, err := os.ReadFile(filepath.Join(dist, m.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := manifest.Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", m.file, err)
		}
		want := kustomizeBuild(t, filepath.Join(repoRoot, "deploy", m.dir))
		if len(got) != len(want) {
			t.Errorf("%s holds %d objects, deploy/%s %d", m.file, len(got), m.dir, len(want))
		}
		for i := range min(len(got), len(want)) {
			pinImage(t, want[i])
			if !reflect.DeepEqual(got[i].Object, want[i].Object) {
				t.Errorf("%s: %s differs from deploy/%s's with the image %s", m.file, objectKey(got[i]), m.dir, repository+":"+testVersion)
			}
		}
		if m.file == "install.yaml" {
			checkInstallHolds(t, got)
		}
	}
}

// checkInstallHolds: the objects a user needs are in install.yaml.
func checkInstallHolds(t *testing.T, objs []*unstructured.Unstructured) {
	var keys []string
	for _, o := range objs {
		keys = append(keys, objectKey(o))
	}
	for _, want := range []string{
		"CustomResourceDefinition/generatingpolicies.policies.kyverno.io",
		"CustomResourceDefinition/namespacedgeneratingpolicies.policies.kyverno.io",
		"CustomResourceDefinition/policyinventories.sprout.dev",
		"CustomResourceDefinition/policysources.sprout.dev",
		"Namespace/sprout-system",
		"ServiceAccount/sprout-system/sprout",
		"ClusterRole/sprout",
		"ClusterRoleBinding/sprout",
		"Deployment/sprout-system/sprout",
	} {
		if !slices.Contains(keys, want) {
			t.Errorf("install.yaml has no %s; it has %v", want, keys)
		}
	}
}

func objectKey(o *unstructured.Unstructured) string {
	return strings.Join(slices.DeleteFunc([]string{o.GetKind(), o.GetNamespace(), o.GetName()}, func(s string) bool { return s == "" }), "/")
}

// kustomizeBuild is `kustomize build dir`.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatal(err)
	}
	data, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// pinImage sets the tag of every container of Sprout's image in o to the
// test's version, as a release does; it fails on a Deployment without one.
func pinImage(t *testing.T, o *unstructured.Unstructured) {
	if o.GetKind() != "Deployment" {
		return
	}
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	pinned := 0
	for _, c := range containers {
		c := c.(map[string]any)
		if image, _ := c["image"].(string); strings.HasPrefix(image, repository+":") {
			c["image"] = repository + ":" + testVersion
			pinned++
		}
	}
	if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	if pinned == 0 {
		t.Errorf("deploy/'s %s runs no %s", objectKey(o), repository)
	}
}

// checkImage: the tarball is a valid OCI image layout naming the version,
// with an image for each platform that runs that platform's binary, from
// the entrypoint, as the non-root user.
func checkImage(t *testing.T, dist string) {
	dir := untar(t, filepath.Join(dist, "sprout-"+testVersion+"-oci.tar"))
	path, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := path.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("index.json: %+v, want one index named %s", topManifest.Manifests, testVersion)
	}
	index, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(index); err != nil {
		t.Fatalf("the image index is not valid: %v", err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkPlatformImage(t, dist, d.Platform, img)
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("the image is for %v, want %v", platforms, want)
	}
}

// checkPlatformImage: the image runs the platform's binary as the
// Dockerfile's image does, and /tmp is writable by its user.
func checkPlatformImage(t *testing.T, dist string, p *v1.Platform, img v1.Image) {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.Architecture != p.Architecture || !slices.Equal(c.Entrypoint, []string{entrypoint}) || !slices.Equal(c.Cmd, []string{"run"}) || c.User != "65532:65532" {
		t.Errorf("%s: config %s, entrypoint %v, command %v, user %q; want %s, [%s], [run], 65532:65532",
			p.Architecture, cf.Architecture, c.Entrypoint, c.Cmd, c.User, p.Architecture, entrypoint)
	}
	files := imageFiles(t, img)
	want, err := fileSHA256(filepath.Join(dist, binary(p.Architecture)))
	if err != nil {
		t.Fatal(err)
	}
	if got := files[entrypoint[1:]]; got.sum != want || got.mode&0o111 == 0 {
		t.Errorf("%s: %s has SHA-256 %q and mode %o, want %s's %s, executable", p.Architecture, entrypoint, got.sum, got.mode, binary(p.Architecture), want)
	}
	if got := files["tmp/"]; got.mode != 0o1777 {
		t.Errorf("%s: /tmp has mode %o, want 1777", p.Architecture, got.mode)
	}
	// The CA roots, where Go's crypto/x509 looks first on Linux: the
	// binary carries none, and HTTPS Git remotes need them.
	roots := x509.NewCertPool()
	if got := files[caFile[1:]]; got.mode != 0o644 || !roots.AppendCertsFromPEM(got.data) || len(got.data) < 100_000 {
		t.Errorf("%s: %s has mode %o and %d bytes of PEM, want the CA roots, readable by all", p.Architecture, caFile, got.mode, len(got.data))
	}
}

type imageFile struct {
	sum  string
	mode int64
	// data is the content of a file under etc/.
	data []byte
}

// imageFiles reads every layer of img: each file's SHA-256 and mode by name.
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]imageFile{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.New()
			var data bytes.Buffer
			w := io.Writer(sum)
			if strings.HasPrefix(h.Name, "etc/") {
				w = io.MultiWriter(sum, &data)
			}
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			files[h.Name] = imageFile{sum: fmt.Sprintf("%x", sum.Sum(nil)), mode: h.Mode, data: data.Bytes()}
		}
		_ = rc.Close()
	}
	return files
}

// untar unpacks the tarball into a new folder and returns it.
func untar(t *testing.T, tarball string) string {
	t.Helper()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("%s: entry %q leaves the folder", tarball, h.Name)
		}
		target := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeDist is a folder holding a small file in place of each binary.
func fakeDist(t *testing.T, arches ...string) string {
	t.Helper()
	dist := t.TempDir()
	for _, arch := range arches {
		if err := os.WriteFile(filepath.Join(dist, binary(arch)), []byte("sprout for "+arch), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dist
}

func testRelease(dist string) release {
	return release{
		Version: "v0.1.0", Commit: "0123456789abcdef", Date: time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC),
		Dist: dist, Deploy: filepath.Join(repoRoot, "deploy"),
	}
}

// TestAssembleIsReproducible: the same binaries, version, commit and date
// give the same files, byte for byte, in another folder at another time.
func TestAssembleIsReproducible(t *testing.T) {
	var sums []string
	for range 2 {
		r := testRelease(fakeDist(t, arches...))
		if err := r.assemble(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(r.Dist, checksumsFile))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, string(data))
	}
	if sums[0] != sums[1] {
		t.Errorf("two assemblies differ:\n%s\n%s", sums[0], sums[1])
	}
}

// TestAssembleNeedsEveryBinary: a release missing a platform's binary is
// refused, naming the platform, and writes nothing.
func TestAssembleNeedsEveryBinary(t *testing.T) {
	r := testRelease(fakeDist(t, "amd64"))
	err := r.assemble()
	if err == nil || !strings.Contains(err.Error(), "linux/arm64") {
		t.Fatalf("assemble without the arm64 binary: %v, want an error naming linux/arm64", err)
	}
	if entries, _ := os.ReadDir(r.Dist); len(entries) != 1 {
		t.Errorf("assemble wrote %d files beside the binary", len(entries)-1)
	}
}
