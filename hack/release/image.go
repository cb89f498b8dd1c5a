package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// entrypoint is where the binary sits in the image, as the Dockerfile puts it.
const entrypoint = "/sprout"

// caFile is where the image keeps the CA roots: the first file Go's
// crypto/x509 (and OpenSSL's Debian layout) looks for on Linux.
const caFile = "/etc/ssl/certs/ca-certificates.crt"

// caRoots returns the roots of Mozilla's NSS trust store that Go's x509roots
// bundle holds, as PEM. A root NSS trusts only for certificates issued
// before a date is left out: a file cannot say so, and a root trusted
// beyond its date would be trusted more than NSS trusts it.
func caRoots() []byte {
	var out bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint == nil {
			_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
		}
	}
	return out.Bytes()
}

// nonroot is distroless's non-root user, which the Dockerfile's image runs
// as and deploy/'s runAsUser names.
const nonroot = "65532"

// The user database of distroless's static image, so tools that map the
// user to a name find one; the binary itself needs none of it.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// writeImage writes the multi-platform image as an OCI image layout, in
// one tarball: `skopeo copy --all oci-archive:FILE docker://REF` or
// `crane push` publishes it, `docker load` (25 and later) loads it.
func (r release) writeImage() error {
	var adds []mutate.IndexAddendum
	for _, arch := range arches {
		img, err := r.platformImage(arch)
		if err != nil {
			return fmt.Errorf("linux/%s: %w", arch, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: cf.Platform()}})
	}
	index := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	annotated, ok := mutate.Annotations(index, r.labels()).(v1.ImageIndex)
	if !ok {
		return fmt.Errorf("annotations: not an image index")
	}
	dir, err := os.MkdirTemp("", "sprout-oci-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// The names tools give the image they load: skopeo and podman read the
	// OCI one, containerd and Docker their own.
	names := layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": r.Version,
		"io.containerd.image.name":          r.image(),
	})
	if err := path.AppendIndex(annotated, names); err != nil {
		return err
	}
	return r.tarFolder(dir, filepath.Join(r.Dist, r.ociTarball()))
}

// labels are the OCI annotations on the index, and the labels of each
// image's config, which `docker inspect` shows.
func (r release) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "sprout",
		"org.opencontainers.image.description": "Kyverno GeneratingPolicies without admission webhooks",
		"org.opencontainers.image.source":      "https://github.com/sprout-gitops/sprout",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.version":     r.Version,
		"org.opencontainers.image.revision":    r.Commit,
		"org.opencontainers.image.created":     r.Date.Format("2006-01-02T15:04:05Z"),
	}
}

// platformImage is the image for linux/arch: one layer on nothing, run as
// the Dockerfile's image runs.
func (r release) platformImage(arch string) (v1.Image, error) {
	rootfs, err := r.rootfs(arch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: r.Date},
		CreatedBy: "make release VERSION=" + r.Version,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: r.Date}
	if arch == "arm64" {
		cf.Variant = "v8" // what registries and Docker expect of arm64
	}
	cf.Config = v1.Config{
		User:       nonroot + ":" + nonroot,
		Entrypoint: []string{entrypoint},
		Cmd:        []string{"run"},
		WorkingDir: "/",
		Labels:     r.labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the layer's tar: the binary, the user database, the CA roots
// and a /tmp anyone may write to, for the Git clones when no volume is
// mounted there.
func (r release) rootfs(arch string) ([]byte, error) {
	bin, err := os.ReadFile(filepath.Join(r.Dist, binary(arch)))
	if err != nil {
		return nil, err
	}
	entries := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/group", 0o644, []byte(group)},
		{"etc/passwd", 0o644, []byte(passwd)},
		{"etc/ssl/", 0o755, nil},
		{"etc/ssl/certs/", 0o755, nil},
		{caFile[1:], 0o644, caRoots()},
		{entrypoint[1:], 0o755, bin},
		{"tmp/", 0o1777, nil},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: r.Date, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarFolder writes the folder dir into the tarball out, in a fixed order
// and with the release's date, so the same binaries give the same file.
func (r release) tarFolder(dir, out string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		name, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(name), Mode: 0o644, ModTime: r.Date, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		return copyInto(tw, h, path)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// copyInto writes the file at path into tw under the header h.
func copyInto(tw *tar.Writer, h *tar.Header, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = info.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
