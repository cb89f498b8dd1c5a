package sources

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sprout-gitops/sprout/internal/gittest"
)

// TestGitOverSSH: a repository served over SSH is read with the authorized
// key (encrypted, with its passphrase) and known_hosts; a wrong key gives a
// clear error and the source keeps its last good revision; the key file is
// read at every check, so putting the right key back needs no restart.
func TestGitOverSSH(t *testing.T) {
	repo := gittest.NewRepo(t)
	first := repo.Commit("a policy", map[string]string{"policies/a.yaml": policyNamed("a")})
	key := newSSHKey(t)
	srv := serveSSH(t, repo.Dir, key.signer.PublicKey())
	dir := t.TempDir()
	files := AuthFiles{
		SSHKeyFile:         writeFile(t, dir, "identity", key.pem(t, "hunter2")),
		SSHKeyPasswordFile: writeFile(t, dir, "passphrase", []byte("hunter2\n")),
		KnownHostsFile:     writeFile(t, dir, "known_hosts", srv.knownHosts()),
	}
	url := srv.url(repo.Dir)
	g, err := NewGit(GitOptions{URL: url, Branch: "main", Path: "policies", Auth: FileAuth(url, files), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h := &recorder{}
	g.poll(ctx, h)
	if len(h.failures) != 0 || len(h.upserts) != 1 || h.upserts[0] != "a@main@sha1:"+first.String() {
		t.Fatalf("with the authorized key: %+v", h)
	}

	writeFile(t, dir, "identity", newSSHKey(t).pem(t, ""))
	repo.Commit("another", map[string]string{"policies/b.yaml": policyNamed("b")})
	g.poll(ctx, h)
	if len(h.failures) != 1 || !strings.Contains(h.failures[0].Error(), "unable to authenticate") {
		t.Fatalf("a wrong key: want a clear authentication error, got %v", h.failures)
	}
	if st := g.Status(); len(h.deletes) != 0 || st.Policies != 1 || st.Revision != "main@sha1:"+first.String() {
		t.Fatalf("after the key went bad: %+v, status %+v", h, st)
	}

	writeFile(t, dir, "identity", key.pem(t, "hunter2"))
	g.poll(ctx, h)
	if len(h.failures) != 1 || len(h.upserts) != 3 || g.Status().Policies != 2 {
		t.Fatalf("after the key file was fixed: %+v, status %+v", h, g.Status())
	}
}

// TestGitOverSSHChecksTheHostKey: a server whose host key known_hosts does
// not hold is refused, with an error that says so.
func TestGitOverSSHChecksTheHostKey(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Commit("a policy", map[string]string{"a.yaml": policyNamed("a")})
	key := newSSHKey(t)
	srv := serveSSH(t, repo.Dir, key.signer.PublicKey())
	other := newSSHKey(t).signer.PublicKey()
	tests := []struct {
		name       string
		knownHosts string
		wantErr    string
	}{
		{"another key for the host", knownhosts.Line([]string{knownhosts.Normalize(srv.addr)}, other),
			"the host key of " + srv.addr + " (ssh-ed25519 SHA256:"},
		{"no key for the host", knownhosts.Line([]string{"[127.0.0.1]:1", "github.com"}, srv.hostKey.signer.PublicKey()),
			"known_hosts has no key for " + knownhosts.Normalize(srv.addr)},
		{"empty", "\n", "known_hosts is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			url := srv.url(repo.Dir)
			auth := FileAuth(url, AuthFiles{
				SSHKeyFile:     writeFile(t, dir, "identity", key.pem(t, "")),
				KnownHostsFile: writeFile(t, dir, "known_hosts", []byte(tt.knownHosts)),
			})
			g, err := NewGit(GitOptions{URL: url, Auth: auth, Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := g.fetch(context.Background(), ""); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

func TestIsSSHURL(t *testing.T) {
	for url, want := range map[string]bool{
		"ssh://git@github.com/org/repo.git": true,
		"git@github.com:org/repo.git":       true,
		"github.com:org/repo.git":           true,
		"https://github.com/org/repo":       false,
		"http://127.0.0.1:8080/repo":        false,
		"file:///srv/repo":                  false,
		"/srv/repo":                         false,
	} {
		if got := IsSSHURL(url); got != want {
			t.Errorf("IsSSHURL(%q) = %v, want %v", url, got, want)
		}
	}
}
