package reconcile_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// warnings keeps the warnings the API server sent.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// TestStatusWritesDrawNoWarning: a policy's status writes draw no
// "unknown field" warning from the API server, under Kyverno's CRDs
// (`make test-kyverno-crds`), which keep conditionStatus alone, as under
// Sprout's: the fields the CRD does not keep are dropped quietly, and
// Sprout says once, in its log, what is lost (under its own CRDs, never).
// Before, every status write under Kyverno's CRDs logged one.
func TestStatusWritesDrawNoWarning(t *testing.T) {
	var w warnings
	config := rest.CopyConfig(cfg)
	config.WarningHandler = &w
	logs, _ := runControllerOn(t, config, nil)
	tb := newTable(t, "status-warnings")
	tb.applyPolicy(derivedPolicy("status-warnings", "status-warnings", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("status-warnings") })
	tb.trigger("a", "status-warnings", "a1")
	tb.waitFor("the policy's object", "a-out", exists)
	poll(t, "the policy's status written", func(ctx context.Context) (bool, error) {
		cond, err := policyCondition(ctx, "status-warnings")
		return cond != nil && cond.Status == metav1.ConditionTrue, err
	})
	if kyvernoCRDs(t) {
		// Told after the write that drops the fields returns.
		poll(t, "the lost status fields told", func(context.Context) (bool, error) {
			return strings.Contains(logs.String(), "the installed policy CRDs are Kyverno's"), nil
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, text := range w.seen {
		if strings.Contains(text, "unknown field") {
			t.Errorf("a write drew a warning: %s", text)
		}
	}
	// The loss is told once, and only where it happens.
	want := 0
	if kyvernoCRDs(t) {
		want = 1
	}
	if n := strings.Count(logs.String(), "the installed policy CRDs are Kyverno's"); n != want {
		t.Errorf("the lost status fields were told %d times, want %d:\n%s", n, want, logs.String())
	}
}
