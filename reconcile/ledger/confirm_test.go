package ledger

import (
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// An object first cached is looked at once, a moment later: still cached
// at that version, it queues its policy; changed or gone since, it had an
// event of its own, and queues nothing more.
func TestFirstSeenIsConfirmedOnce(t *testing.T) {
	core := newFakeCore(key)
	l := New(core, fakeCache{}, nil, nil, slog.New(slog.DiscardHandler))
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	kept := generated(t, key, "default", "a", "t1", false)
	gone := generated(t, key, "default", "b", "t1", false)
	_ = store.Add(kept)
	l.ConfirmLater(store, key, kept)
	l.ConfirmLater(store, key, gone)
	deadline := time.Now().Add(10 * time.Second)
	for l.ConfirmationLooks() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if looks := l.ConfirmationLooks(); looks != 1 {
		t.Fatalf("%d looks, want one for both objects", looks)
	}
	if got := core.queuedGenerated(); len(got) != 1 || got[0] != key {
		t.Errorf("queued %v, want the policy once, for the object still cached", got)
	}
}
