package reconcile_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/sprout-gitops/sprout/internal/syncbuf"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestPolicyRecreatedAfterARestartDoesNotCrash: a policy deleted just
// before Sprout stops, and made again under its name, with another
// trigger kind, once Sprout runs again. The next Sprout forgets the old
// policy while a sync of it waits for a cache; that sync's back-off asked
// the count of waits of a state already dropped, 0, and shifted by -1: a
// panic that took the whole controller down.
func TestPolicyRecreatedAfterARestartDoesNotCrash(t *testing.T) {
	opts := reconcile.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&syncbuf.Buffer{}, nil))
	first, stop := launchController(t, cfg, opts)
	poll(t, "the first Sprout's caches", func(context.Context) (bool, error) { return first.Synced(), nil })
	c := conformanceClient(t)
	c.create(c.policy("generating-policies/clone/nosync/nosync-delete-trigger"))
	c.create(sourceSecret("regcred"))
	c.create(configMapIn("recreated-ns", "a"))
	c.waitFor("the downstream", secretRef("recreated-ns", "regcred"), present)
	c.delete(ref{"policies.kyverno.io/v1beta1", "GeneratingPolicy", "", "generate-networkpolicy"})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	newConformance(t).generateOnTriggerDeletion("recreated-ns", "b")
}
