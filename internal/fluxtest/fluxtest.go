// Package fluxtest stands in for Flux's source-controller in tests: it
// installs source-controller's CRDs (GitRepository, OCIRepository, Bucket,
// copied unchanged from github.com/fluxcd/source-controller v1.9.6's
// config/crd/bases) in a test control plane, serves artifacts over HTTP on
// 127.0.0.1, and writes a source object's status as source-controller would.
// The tests of sources and of `sprout run` share it; nothing else imports it.
package fluxtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

//go:embed crds/*.yaml
var crds embed.FS

// InstallCRDs installs the three source kinds' CRDs and waits until they
// are served. Installing them again is harmless.
func InstallCRDs(t testing.TB, cfg *rest.Config) {
	t.Helper()
	files, err := fs.Glob(crds, "crds/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := crds.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		list = append(list, crd)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: list}); err != nil {
		t.Fatal(err)
	}
}

// Entry is one entry of a tarball: a regular file with Body, or a link to
// Link.
type Entry struct {
	Name, Body, Link string
}

// Tarball makes a gzipped tarball of entries, as source-controller serves.
func Tarball(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: 0o644, Size: int64(len(e.Body)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if e.Link != "" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.Link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.Link == "" {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Digest is the digest source-controller gives data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Server serves artifacts on 127.0.0.1, as source-controller's storage
// does; a path not published is a 404.
type Server struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

// NewServer starts a server, stopped when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{files: map[string][]byte{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		data, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// Publish serves data at path ("/gitrepository/ns/name/rev.tar.gz") and
// returns its URL.
func (s *Server) Publish(path string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = data
	return s.srv.URL + path
}

// URL is where path is, published or not.
func (s *Server) URL(path string) string { return s.srv.URL + path }

// Status is what SetStatus writes: an artifact (none when URL is empty)
// and the Ready condition.
type Status struct {
	Revision, Digest, URL string
	Ready                 metav1.ConditionStatus
	Reason, Message       string
}

// SetStatus creates the source object kind/namespace/name if it is
// missing and writes its status.
func SetStatus(t testing.TB, client dynamic.Interface, kind, namespace, name string, st Status) {
	t.Helper()
	ctx := context.Background()
	res := client.Resource(sourcev1.GroupVersion.WithResource(resources[kind])).Namespace(namespace)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		u, err = res.Create(ctx, newObject(kind, namespace, name), metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]any{"observedGeneration": u.GetGeneration()}
	if st.URL != "" {
		status["artifact"] = map[string]any{
			"revision": st.Revision, "digest": st.Digest, "url": st.URL, "path": "x.tar.gz",
			"lastUpdateTime": time.Now().UTC().Format(time.RFC3339),
		}
	}
	if st.Ready != "" {
		reason := st.Reason
		if reason == "" {
			reason = "Succeeded"
		}
		status["conditions"] = []any{map[string]any{
			"type": "Ready", "status": string(st.Ready), "reason": reason, "message": st.Message,
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": u.GetGeneration(),
		}}
	}
	u.Object["status"] = status
	if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var resources = map[string]string{
	sourcev1.GitRepositoryKind: "gitrepositories",
	sourcev1.OCIRepositoryKind: "ocirepositories",
	sourcev1.BucketKind:        "buckets",
}

// newObject is a source object with the least spec its schema takes.
func newObject(kind, namespace, name string) *unstructured.Unstructured {
	spec := map[string]any{"interval": "1m"}
	switch kind {
	case sourcev1.GitRepositoryKind:
		spec["url"] = "https://example.com/platform.git"
	case sourcev1.OCIRepositoryKind:
		spec["url"] = "oci://example.com/platform"
	case sourcev1.BucketKind:
		spec["bucketName"] = "platform"
		spec["endpoint"] = "example.com"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sourcev1.GroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     spec,
	}}
}
