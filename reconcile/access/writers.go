package access

import (
	"sync"

	"k8s.io/client-go/rest"
)

// Writers keeps one client of kind W per account, impersonating it, made
// the first time the account writes.
type Writers[W any] struct {
	cfg   *rest.Config
	own   W
	build func(*rest.Config) (W, error)

	mu      sync.Mutex
	writers map[Account]W
}

// NewWriters makes the writers of the accounts from cfg, each with build;
// own is Sprout's own.
func NewWriters[W any](cfg *rest.Config, own W, build func(*rest.Config) (W, error)) *Writers[W] {
	return &Writers[W]{cfg: cfg, own: own, build: build}
}

// For returns the writer of sa, or Sprout's own for nil.
func (w *Writers[W]) For(sa *Account) (W, error) {
	if sa == nil {
		return w.own, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if got, ok := w.writers[*sa]; ok {
		return got, nil
	}
	cfg := rest.CopyConfig(w.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa.User()}
	made, err := w.build(cfg)
	if err != nil {
		return made, err
	}
	if w.writers == nil {
		w.writers = map[Account]W{}
	}
	w.writers[*sa] = made
	return made, nil
}
