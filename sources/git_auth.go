package sources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// AuthFunc returns the credentials for one check or fetch of a Git remote,
// nil for none. A Git source calls it every time, so credentials rotated in a
// file or a Secret are used without a restart.
type AuthFunc func(ctx context.Context) (transport.AuthMethod, error)

// BasicAuth authenticates over HTTPS with a user name and password (or a
// token as password, as GitHub and GitLab accept).
func BasicAuth(user, password string) transport.AuthMethod {
	return &githttp.BasicAuth{Username: user, Password: password}
}

// TokenAuth authenticates over HTTPS with a bearer token.
func TokenAuth(token string) transport.AuthMethod {
	return &githttp.TokenAuth{Token: token}
}

// IsSSHURL reports whether url reaches its repository over SSH: ssh:// or
// scp-like (git@host:path).
func IsSSHURL(url string) bool {
	ep, err := transport.NewEndpoint(url)
	return err == nil && ep.Protocol == "ssh"
}

// SSHAuth authenticates over SSH to the host of url with a private key (PEM
// or OpenSSH format; passphrase decrypts it if it is encrypted) and accepts
// only a host key that knownHosts (the known_hosts file format) holds for
// that host. The user is the URL's, "git" when it names none.
func SSHAuth(url string, identity, passphrase, knownHosts []byte) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, err
	}
	if len(identity) == 0 {
		return nil, errors.New("the SSH private key is empty")
	}
	if len(strings.TrimSpace(string(knownHosts))) == 0 {
		return nil, errors.New("known_hosts is empty: Sprout does not connect to an SSH host it cannot verify")
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	signer, err := ssh.ParsePrivateKey(identity)
	var encrypted *ssh.PassphraseMissingError
	if errors.As(err, &encrypted) {
		if len(passphrase) == 0 {
			return nil, errors.New("the SSH private key is encrypted and no passphrase was given")
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase(identity, passphrase)
	}
	if err != nil {
		return nil, fmt.Errorf("SSH private key: %w", err)
	}
	keys := &gitssh.PublicKeys{User: user, Signer: signer}
	port := ep.Port
	if port <= 0 {
		port = gitssh.DefaultPort
	}
	check, algorithms, err := hostKeyCallback(knownHosts, net.JoinHostPort(ep.Host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	keys.HostKeyCallback, keys.HostKeyAlgorithms = check, algorithms
	return keys, nil
}

// hostKeyCallback accepts the host keys knownHosts holds for host (a
// host:port) and names their algorithms, so the server shows a key of a type
// known_hosts holds rather than the first one it prefers.
func hostKeyCallback(knownHosts []byte, host string) (ssh.HostKeyCallback, []string, error) {
	// go-git's known_hosts database reads files only.
	f, err := os.CreateTemp("", "sprout-known-hosts-")
	if err != nil {
		return nil, nil, err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(knownHosts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	db, err := gitssh.NewKnownHostsDb(f.Name())
	if err != nil {
		return nil, nil, fmt.Errorf("known_hosts: %w", err)
	}
	algorithms := db.HostKeyAlgorithms(host)
	if len(algorithms) == 0 {
		return nil, nil, fmt.Errorf("known_hosts has no key for %s", knownhosts.Normalize(host))
	}
	check := db.HostKeyCallback()
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		var keyErr *knownhosts.KeyError
		if !errors.As(err, &keyErr) {
			return err
		}
		verdict := "is not in known_hosts"
		if len(keyErr.Want) > 0 {
			verdict = "does not match known_hosts"
		}
		return fmt.Errorf("the host key of %s (%s %s) %s: %w", hostname, key.Type(), ssh.FingerprintSHA256(key), verdict, err)
	}, algorithms, nil
}

// AuthFiles names files holding Git credentials: a password or a token for
// HTTPS, a private key and known_hosts for SSH.
type AuthFiles struct {
	// Username is the HTTPS basic-auth user that goes with PasswordFile.
	Username string
	// PasswordFile holds the HTTPS basic-auth password (or a token used as one).
	PasswordFile string
	// TokenFile holds an HTTPS bearer token.
	TokenFile string
	// SSHKeyFile holds the SSH private key.
	SSHKeyFile string
	// SSHKeyPasswordFile holds the passphrase of an encrypted SSHKeyFile.
	SSHKeyPasswordFile string
	// KnownHostsFile holds the SSH host keys to accept (known_hosts format).
	KnownHostsFile string
}

// FileAuth returns the credentials the files hold for url, read at every
// check so a rotated file is used without a restart: the SSH key and
// known_hosts for an SSH URL, else the token or the password (token first).
func FileAuth(url string, files AuthFiles) AuthFunc {
	return func(context.Context) (transport.AuthMethod, error) {
		if IsSSHURL(url) {
			if files.SSHKeyFile == "" || files.KnownHostsFile == "" {
				return nil, errors.New("an SSH URL needs a private key file and a known_hosts file")
			}
			identity, err := os.ReadFile(files.SSHKeyFile)
			if err != nil {
				return nil, err
			}
			knownHosts, err := os.ReadFile(files.KnownHostsFile)
			if err != nil {
				return nil, err
			}
			var passphrase []byte
			if files.SSHKeyPasswordFile != "" {
				if passphrase, err = os.ReadFile(files.SSHKeyPasswordFile); err != nil {
					return nil, err
				}
			}
			return SSHAuth(url, identity, trimNewline(passphrase), knownHosts)
		}
		switch {
		case files.TokenFile != "":
			token, err := os.ReadFile(files.TokenFile)
			if err != nil {
				return nil, err
			}
			return TokenAuth(strings.TrimSpace(string(token))), nil
		case files.PasswordFile != "":
			password, err := os.ReadFile(files.PasswordFile)
			if err != nil {
				return nil, err
			}
			return BasicAuth(files.Username, strings.TrimSpace(string(password))), nil
		}
		return nil, nil
	}
}

// trimNewline drops the line end a passphrase file or Secret value often
// ends with; other white space may belong to the passphrase.
func trimNewline(b []byte) []byte {
	return []byte(strings.TrimRight(string(b), "\r\n"))
}
