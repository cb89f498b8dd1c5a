package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SecretAuth returns the credentials a Secret holds for url, under the key
// names Flux's GitRepository reads:
//   - SSH URLs: identity (the private key) and known_hosts, both required,
//     and password, the key's passphrase if it is encrypted;
//   - HTTPS: bearerToken, or username and password for basic auth.
//
// The Secret is read again at every check, so rotating it takes effect
// without a restart; a missing Secret or key fails that check like any
// other fetch error, and the last good revision keeps running.
func SecretAuth(client kubernetes.Interface, namespace, name, url string) AuthFunc {
	return func(ctx context.Context) (transport.AuthMethod, error) {
		secret, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read secret %s/%s: %w", namespace, name, err)
		}
		auth, err := authFromSecret(secret, url)
		if err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
		}
		return auth, nil
	}
}

// authFromSecret picks the credentials for url out of a Secret's data.
func authFromSecret(secret *corev1.Secret, url string) (transport.AuthMethod, error) {
	data := secret.Data
	if IsSSHURL(url) {
		if len(data["identity"]) == 0 || len(data["known_hosts"]) == 0 {
			return nil, errors.New("an SSH URL needs the keys identity and known_hosts")
		}
		return SSHAuth(url, data["identity"], trimNewline(data["password"]), data["known_hosts"])
	}
	value := func(key string) string { return strings.TrimSpace(string(data[key])) }
	switch {
	case value("bearerToken") != "":
		return TokenAuth(value("bearerToken")), nil
	case value("username") != "" && value("password") != "":
		return BasicAuth(value("username"), value("password")), nil
	case value("username") != "" || value("password") != "":
		return nil, errors.New("basic auth needs both the keys username and password")
	}
	return nil, errors.New("no credentials: give the key bearerToken, or username and password")
}
