package sources

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshKey is a fresh ed25519 key pair.
type sshKey struct {
	private ed25519.PrivateKey
	signer  ssh.Signer
}

func newSSHKey(t *testing.T) sshKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return sshKey{private: priv, signer: signer}
}

// pem returns the private key in OpenSSH format, encrypted with passphrase
// unless it is empty.
func (k sshKey) pem(t *testing.T, passphrase string) []byte {
	t.Helper()
	var (
		block *pem.Block
		err   error
	)
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(k.private, "")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(k.private, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// sshServer serves one repository over SSH on 127.0.0.1 the way a Git host
// does: public-key auth for one authorized key, then `git-upload-pack
// '<path>'` run by the real git-upload-pack.
type sshServer struct {
	addr    string
	hostKey sshKey

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// serveSSH serves the repository at dir to the holder of authorized, until
// the test ends.
func serveSSH(t *testing.T, dir string, authorized ssh.PublicKey) *sshServer {
	t.Helper()
	s := &sshServer{hostKey: newSSHKey(t), conns: map[net.Conn]struct{}{}}
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) != string(authorized.Marshal()) {
				return nil, errors.New("key not authorized")
			}
			return nil, nil
		},
	}
	config.AddHostKey(s.hostKey.signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return // closed
			}
			s.track(conn, true)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.track(conn, false)
				s.serve(conn, config, dir)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *sshServer) track(c net.Conn, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
		c.Close()
	}
}

// url is the repository's ssh:// URL.
func (s *sshServer) url(dir string) string { return "ssh://git@" + s.addr + dir }

// knownHosts is a known_hosts line for the server's host key.
func (s *sshServer) knownHosts() []byte {
	return []byte(knownhosts.Line([]string{knownhosts.Normalize(s.addr)}, s.hostKey.signer.PublicKey()) + "\n")
}

func (s *sshServer) serve(conn net.Conn, config *ssh.ServerConfig, dir string) {
	_, chans, reqs, err := ssh.NewServerConn(conn, config)
	if err != nil {
		return // a refused key or host key ends here
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.session(ch, requests, dir)
		}()
	}
}

// session runs one exec request of git-upload-pack and reports its exit
// status; it refuses everything else.
func (s *sshServer) session(ch ssh.Channel, requests <-chan *ssh.Request, dir string) {
	defer ch.Close()
	for req := range requests {
		if req.Type != "exec" {
			_ = req.Reply(false, nil) // env, pty-req, shell: not served
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		status := s.uploadPack(ch, payload.Command, dir)
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}

// uploadPack runs `git-upload-pack '<dir>'` with the channel as its stdin,
// stdout and stderr.
func (s *sshServer) uploadPack(ch ssh.Channel, command, dir string) uint32 {
	path, ok := strings.CutPrefix(command, "git-upload-pack '")
	path, ok2 := strings.CutSuffix(path, "'")
	if !ok || !ok2 || path != dir {
		fmt.Fprintf(ch.Stderr(), "fatal: %q: not served here\n", command)
		return 128
	}
	cmd := exec.Command("git-upload-pack", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(ch.Stderr(), err)
		return 1
	}
	// Not cmd.Stdin = ch: Wait would then wait for the client to close its
	// side, which it does only after the exit status.
	go func() {
		_, _ = io.Copy(stdin, ch)
		stdin.Close()
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return uint32(exit.ExitCode())
	}
	if err != nil {
		return 1
	}
	return 0
}
