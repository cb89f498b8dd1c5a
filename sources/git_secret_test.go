package sources

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	corev1 "k8s.io/api/core/v1"
)

// TestAuthFromSecret: the Secret's keys, named as Flux names them, give the
// credentials the URL's protocol takes. The Secret read itself is tested
// against a real API server by `sprout run --git-secret-ref`.
func TestAuthFromSecret(t *testing.T) {
	key := newSSHKey(t)
	const (
		https      = "https://git.example.com/org/repo"
		sshURL     = "ssh://deploy@git.example.com:2222/org/repo"
		knownHosts = "[git.example.com]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
	)
	tests := []struct {
		name    string
		url     string
		data    map[string]string
		check   func(t *testing.T, auth transport.AuthMethod)
		wantErr string
	}{
		{name: "basic auth, line ends trimmed", url: https, data: map[string]string{"username": "sprout\n", "password": "s3cret\n"},
			check: func(t *testing.T, auth transport.AuthMethod) {
				if b, ok := auth.(*githttp.BasicAuth); !ok || b.Username != "sprout" || b.Password != "s3cret" {
					t.Errorf("got %#v", auth)
				}
			}},
		{name: "a bearer token wins over basic auth", url: https, data: map[string]string{"bearerToken": "t0ken", "username": "u", "password": "p"},
			check: func(t *testing.T, auth transport.AuthMethod) {
				if b, ok := auth.(*githttp.TokenAuth); !ok || b.Token != "t0ken" {
					t.Errorf("got %#v", auth)
				}
			}},
		{name: "a user without a password", url: https, data: map[string]string{"username": "sprout"}, wantErr: "both the keys username and password"},
		{name: "no credentials", url: https, data: map[string]string{"identity": "x"}, wantErr: "no credentials: give the key bearerToken, or username and password"},
		{name: "an SSH key and known_hosts", url: sshURL, data: map[string]string{"identity": string(key.pem(t, "")), "known_hosts": knownHosts},
			check: func(t *testing.T, auth transport.AuthMethod) {
				k, ok := auth.(*gitssh.PublicKeys)
				if !ok || k.User != "deploy" || k.HostKeyCallback == nil || len(k.HostKeyAlgorithms) == 0 {
					t.Errorf("got %#v", auth)
				}
			}},
		{name: "an encrypted key and its passphrase", url: "git@git.example.com:org/repo.git",
			data: map[string]string{"identity": string(key.pem(t, "hunter2")), "password": "hunter2\n", "known_hosts": strings.Replace(knownHosts, "[git.example.com]:2222", "git.example.com", 1)},
			check: func(t *testing.T, auth transport.AuthMethod) {
				if k, ok := auth.(*gitssh.PublicKeys); !ok || k.User != "git" {
					t.Errorf("got %#v", auth)
				}
			}},
		{name: "an encrypted key without a passphrase", url: sshURL, data: map[string]string{"identity": string(key.pem(t, "hunter2")), "known_hosts": knownHosts},
			wantErr: "encrypted and no passphrase"},
		{name: "an SSH key without known_hosts", url: sshURL, data: map[string]string{"identity": string(key.pem(t, ""))},
			wantErr: "an SSH URL needs the keys identity and known_hosts"},
		{name: "known_hosts for other hosts", url: sshURL, data: map[string]string{"identity": string(key.pem(t, "")), "known_hosts": strings.Replace(knownHosts, "2222", "22", 1)},
			wantErr: "known_hosts has no key for [git.example.com]:2222"},
		{name: "HTTPS credentials for an SSH URL", url: sshURL, data: map[string]string{"username": "u", "password": "p"},
			wantErr: "an SSH URL needs the keys identity and known_hosts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := &corev1.Secret{Data: map[string][]byte{}}
			for k, v := range tt.data {
				secret.Data[k] = []byte(v)
			}
			auth, err := authFromSecret(secret, tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, auth)
		})
	}
}
