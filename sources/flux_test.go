package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/fluxtest"
)

// The Flux tests need an API server; the rest of the package does not, so
// it is started by the first test that asks and stopped by TestMain.
var fluxCP struct {
	once sync.Once
	cp   *controlplane.ControlPlane
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fluxCP.cp != nil {
		if err := fluxCP.cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}
	os.Exit(code)
}

// fluxCluster returns a client of a control plane with source-controller's
// CRDs installed.
func fluxCluster(t *testing.T) dynamic.Interface {
	t.Helper()
	fluxCP.once.Do(func() { fluxCP.cp, fluxCP.err = controlplane.Start() })
	if fluxCP.err != nil {
		t.Fatal(fluxCP.err)
	}
	fluxtest.InstallCRDs(t, fluxCP.cp.Config)
	return dynamic.NewForConfigOrDie(fluxCP.cp.Config)
}

// syncRecorder is a recorder a running source may call from its goroutine.
type syncRecorder struct {
	mu sync.Mutex
	r  recorder
}

func (s *syncRecorder) Upsert(p Policy)               { s.mu.Lock(); defer s.mu.Unlock(); s.r.Upsert(p) }
func (s *syncRecorder) Delete(p Policy)               { s.mu.Lock(); defer s.mu.Unlock(); s.r.Delete(p) }
func (s *syncRecorder) Release(p Policy)              { s.mu.Lock(); defer s.mu.Unlock(); s.r.Release(p) }
func (s *syncRecorder) Invalid(string, string, error) {}
func (s *syncRecorder) SourceChecked(n string, st Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.SourceChecked(n, st)
}
func (s *syncRecorder) SourceComplete(n string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.SourceComplete(n)
}

func (s *syncRecorder) has(upsert, del string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return (upsert == "" || slices.Contains(s.r.upserts, upsert)) && (del == "" || slices.Contains(s.r.deletes, del))
}

// publish serves a tarball of entries as revision rev of the source and
// writes the source's status to point at it, Ready.
func publish(t *testing.T, client dynamic.Interface, srv *fluxtest.Server, ref FluxRef, rev string, entries ...fluxtest.Entry) {
	t.Helper()
	data := fluxtest.Tarball(t, entries...)
	url := srv.Publish("/"+strings.ToLower(ref.Kind)+"/"+ref.Namespace+"/"+ref.Name+"/"+rev+".tar.gz", data)
	fluxtest.SetStatus(t, client, ref.Kind, ref.Namespace, ref.Name, fluxtest.Status{
		Revision: rev, Digest: fluxtest.Digest(data), URL: url, Ready: metav1.ConditionTrue,
	})
}

// TestFluxSourceFollowsTheArtifact: a new artifact is taken as soon as the
// source object says so (the interval is an hour: only the watch can
// notice), a new policy appears and a removed one is deleted; what lies
// outside the path is not read.
func TestFluxSourceFollowsTheArtifact(t *testing.T) {
	client := fluxCluster(t)
	srv := fluxtest.NewServer(t)
	for _, kind := range []string{"GitRepository", "OCIRepository", "Bucket"} {
		t.Run(kind, func(t *testing.T) {
			ref := FluxRef{Kind: kind, Namespace: "default", Name: "follow"}
			publish(t, client, srv, ref, "main@sha1:1",
				fluxtest.Entry{Name: "policies/a.yaml", Body: policyNamed("a")},
				fluxtest.Entry{Name: "elsewhere/broken.yaml", Body: "not: [read"},
				fluxtest.Entry{Name: "elsewhere/link.yaml", Link: "/etc/passwd"})
			f, err := NewFlux(FluxOptions{Ref: ref, Path: "policies", Client: client, Interval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer f.Wait()
			defer cancel()
			h := &syncRecorder{}
			if err := f.Start(ctx, h); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the first revision", func() bool { return h.has("a@main@sha1:1", "") && f.Complete() })

			publish(t, client, srv, ref, "main@sha1:2",
				fluxtest.Entry{Name: "policies/a.yaml", Body: policyNamed("a")},
				fluxtest.Entry{Name: "policies/nested/b.yaml", Body: policyNamed("b")})
			waitUntil(t, "the new policy", func() bool { return h.has("b@main@sha1:2", "") })

			publish(t, client, srv, ref, "main@sha1:3", fluxtest.Entry{Name: "policies/nested/b.yaml", Body: policyNamed("b")})
			waitUntil(t, "the removed policy to be deleted", func() bool { return h.has("b@main@sha1:3", "a") })
			if st := f.Status(); st.Err != nil || st.Revision != "main@sha1:3" || st.Policies != 1 {
				t.Errorf("status: %+v", st)
			}
		})
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestFluxSourceRefusesBadArtifacts: an artifact that does not match its
// digest, is not there, holds a link or a name leaving the folder, or a
// source that is not ready, fails the check with what went wrong, and the
// last good revision keeps running; a source being reconciled is waited for.
func TestFluxSourceRefusesBadArtifacts(t *testing.T) {
	client := fluxCluster(t)
	t.Setenv("TMPDIR", t.TempDir()) // counted alone, whatever else runs
	srv := fluxtest.NewServer(t)
	ref := FluxRef{Kind: "GitRepository", Namespace: "default", Name: "refuse"}
	good := fluxtest.Tarball(t, fluxtest.Entry{Name: "policies/a.yaml", Body: policyNamed("a")})
	goodURL := srv.Publish("/good.tar.gz", good)
	fluxtest.SetStatus(t, client, ref.Kind, ref.Namespace, ref.Name, fluxtest.Status{Revision: "main@sha1:1", Digest: fluxtest.Digest(good), URL: goodURL, Ready: metav1.ConditionTrue})
	f, err := NewFlux(FluxOptions{Ref: ref, Path: "policies", Client: client})
	if err != nil {
		t.Fatal(err)
	}
	h := &recorder{}
	ctx := context.Background()
	f.poll(ctx, h)
	if len(h.upserts) != 1 || h.complete != 1 || len(h.failures) != 0 {
		t.Fatalf("the good revision: %+v", h)
	}

	other := fluxtest.Tarball(t, fluxtest.Entry{Name: "policies/b.yaml", Body: policyNamed("b")})
	tarball := func(entries ...fluxtest.Entry) fluxtest.Status {
		data := fluxtest.Tarball(t, entries...)
		return fluxtest.Status{Revision: "main@sha1:2", Digest: fluxtest.Digest(data), URL: srv.Publish("/"+t.Name()+fmt.Sprint(len(data))+".tar.gz", data), Ready: metav1.ConditionTrue}
	}
	tests := []struct {
		name     string
		status   fluxtest.Status
		rejected bool     // a RejectedError, not a failed check
		wantErr  []string // all in the error; none: waited for, no failure
	}{
		{name: "digest mismatch", rejected: true, wantErr: []string{"digest sha256:", "status.artifact.digest", "main@sha1:2"},
			status: fluxtest.Status{Revision: "main@sha1:2", Digest: fluxtest.Digest(good), URL: srv.Publish("/other.tar.gz", other), Ready: metav1.ConditionTrue}},
		{name: "unknown digest algorithm", rejected: true, wantErr: []string{"status.artifact.digest", "blake3"},
			status: fluxtest.Status{Revision: "main@sha1:2", Digest: "blake3:00", URL: srv.Publish("/other.tar.gz", other), Ready: metav1.ConditionTrue}},
		{name: "404", wantErr: []string{"404 Not Found", "/gone.tar.gz"},
			status: fluxtest.Status{Revision: "main@sha1:2", Digest: fluxtest.Digest(other), URL: srv.URL("/gone.tar.gz"), Ready: metav1.ConditionTrue}},
		{name: "a policy file that is a link", rejected: true, wantErr: []string{"policies/link.yaml: a symbolic link"},
			status: tarball(fluxtest.Entry{Name: "policies/b.yaml", Body: policyNamed("b")}, fluxtest.Entry{Name: "policies/link.yaml", Link: "../../etc/passwd"})},
		{name: "the path is a link", rejected: true, wantErr: []string{"policies: a symbolic link, not a folder"},
			status: tarball(fluxtest.Entry{Name: "real/b.yaml", Body: policyNamed("b")}, fluxtest.Entry{Name: "policies", Link: "real"})},
		{name: "a name leaving the folder", rejected: true, wantErr: []string{"../outside.yaml"},
			status: tarball(fluxtest.Entry{Name: "policies/b.yaml", Body: policyNamed("b")}, fluxtest.Entry{Name: "policies/../../outside.yaml", Body: policyNamed("c")})},
		{name: "no such path", wantErr: []string{"policies: no such folder"},
			status: tarball(fluxtest.Entry{Name: "other/b.yaml", Body: policyNamed("b")})},
		{name: "a broken policy", rejected: true, wantErr: []string{"policies/b.yaml"},
			status: tarball(fluxtest.Entry{Name: "policies/b.yaml", Body: "kind: [GeneratingPolicy"})},
		{name: "not ready", wantErr: []string{"GitRepository/default/refuse is not ready (GitOperationFailed): auth failed"},
			status: fluxtest.Status{Revision: "main@sha1:1", Digest: fluxtest.Digest(good), URL: goodURL, Ready: metav1.ConditionFalse, Reason: "GitOperationFailed", Message: "auth failed"}},
		{name: "no artifact", wantErr: []string{"GitRepository/default/refuse has no artifact"},
			status: fluxtest.Status{Ready: metav1.ConditionTrue}},
		{name: "being reconciled",
			status: fluxtest.Status{Revision: "main@sha1:2", Digest: fluxtest.Digest(other), URL: srv.Publish("/other.tar.gz", other), Ready: metav1.ConditionUnknown, Reason: "Progressing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fluxtest.SetStatus(t, client, ref.Kind, ref.Namespace, ref.Name, tt.status)
			failures := len(h.failures)
			f.poll(ctx, h)
			st := f.Status()
			if len(tt.wantErr) == 0 {
				if len(h.failures) != failures || st.Check != CheckUnchanged {
					t.Fatalf("waiting must not fail: %+v", st)
				}
			} else {
				if st.Err == nil || st.Check != CheckFailed {
					t.Fatalf("want a failed check, got %+v", st)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(st.Err.Error(), w) {
						t.Errorf("error %q does not say %q", st.Err, w)
					}
				}
				var rejected *RejectedError
				if errors.As(st.Err, &rejected) != tt.rejected {
					t.Errorf("rejected %v, want %v: %v", !tt.rejected, tt.rejected, st.Err)
				}
			}
			if len(h.deletes) != 0 || st.Revision != "main@sha1:1" || st.Policies != 1 {
				t.Errorf("the last good revision must keep running: deletes %v, status %+v", h.deletes, st)
			}
		})
	}

	fluxtest.SetStatus(t, client, ref.Kind, ref.Namespace, ref.Name, fluxtest.Status{Revision: "main@sha1:2", Digest: fluxtest.Digest(other), URL: srv.Publish("/other.tar.gz", other), Ready: metav1.ConditionTrue})
	f.poll(ctx, h)
	if st := f.Status(); st.Err != nil || st.Revision != "main@sha1:2" || !slices.Equal(h.deletes, []string{"a"}) {
		t.Errorf("the good revision after: status %+v, deletes %v", st, h.deletes)
	}
	if err := client.Resource(ref.GVR()).Namespace(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletes := len(h.deletes)
	f.poll(ctx, h)
	if st := f.Status(); st.Err == nil || !strings.Contains(st.Err.Error(), "GitRepository/default/refuse: not found") || len(h.deletes) != deletes || st.Policies != 1 {
		t.Errorf("a deleted source object: status %+v, deletes %v", st, h.deletes)
	}
	if left := sproutFluxDirs(t); left != 0 {
		t.Errorf("%d temporary files or folders left behind", left)
	}
}

func sproutFluxDirs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "sprout-flux-") {
			n++
		}
	}
	return n
}

func TestParseFluxRef(t *testing.T) {
	for in, want := range map[string]string{
		"GitRepository/flux-system/platform": "GitRepository/flux-system/platform",
		"ocirepository/ns/policies":          "OCIRepository/ns/policies",
		"Bucket/ns/b":                        "Bucket/ns/b",
	} {
		if ref, err := ParseFluxRef(in); err != nil || ref.String() != want {
			t.Errorf("%s: %v, %v", in, ref, err)
		}
	}
	for in, want := range map[string]string{
		"GitRepository/platform":     "want <kind>/<namespace>/<name>",
		"GitRepository//platform":    "want <kind>/<namespace>/<name>",
		"HelmChart/flux-system/x":    `kind "HelmChart" is not a Flux source`,
		"GitRepository/ns/name/more": "want <kind>/<namespace>/<name>",
	} {
		if _, err := ParseFluxRef(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// TestUntarPoliciesFolders: the path counts as there when the tarball holds
// it, even with no policy file in it (an empty revision, not a missing
// folder); hidden folders and other files are not read, as in Git.
func TestUntarPoliciesFolders(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		entries []fluxtest.Entry
		want    int
		wantErr string
	}{
		{name: "no policy file in the folder", dir: "policies", entries: []fluxtest.Entry{{Name: "policies/README.md", Body: "none"}}},
		{name: "no such folder", dir: "policies", entries: []fluxtest.Entry{{Name: "policiesx/a.yaml", Body: policyNamed("a")}}, wantErr: "policies: no such folder"},
		{name: "hidden folders and other files", dir: "/policies/", want: 1, entries: []fluxtest.Entry{
			{Name: "policies/a.yaml", Body: policyNamed("a")},
			{Name: "policies/.github/broken.yaml", Body: "not: [read"},
			{Name: "policies/.github/link.yaml", Link: "/etc/passwd"},
			{Name: "policies/link.md", Link: "/etc/passwd"},
		}},
		{name: "the root", dir: "", want: 2, entries: []fluxtest.Entry{
			{Name: "a.yaml", Body: policyNamed("a")},
			{Name: "deep/er/b.yml", Body: policyNamed("b")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := fluxtest.Tarball(t, tt.entries...)
			got, err := untarPolicies(strings.NewReader(string(data)), tt.dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got.policies) != tt.want {
				t.Fatalf("%d policies, %v; want %d", len(got.policies), err, tt.want)
			}
		})
	}
}
