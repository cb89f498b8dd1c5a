package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// writer applies desired objects and prunes stale ones: the inventory's
// Applier, or its DryRun.
type writer interface {
	Apply(ctx context.Context, objects []*unstructured.Unstructured, live inventory.Live, opts inventory.ApplyOptions) (inventory.ChangeSet, error)
	Prune(ctx context.Context, objects []*unstructured.Unstructured) (inventory.ChangeSet, error)
}

var (
	_ writer = (*inventory.Applier)(nil)
	_ writer = inventory.DryRun{}
)

// PolicyPlan is what one sync of a policy would do.
type PolicyPlan struct {
	// Policy is Kind/[namespace/]name.
	Policy string
	// Changes hold one entry per object, with Before and After set for
	// those that would change.
	Changes inventory.ChangeSet
	// Err is why the policy could not be planned whole (it does not
	// compile, an evaluation failed, the API server refused a dry run).
	Err error
	// Held, when not empty, says that the blast-radius guard would hold
	// the deletions and overwrites among Changes, and why.
	Held string
}

// plans keeps the last sync's changes per policy, in a dry run.
type plans struct {
	mu    sync.Mutex
	byKey map[policy.Key]PolicyPlan
}

func (p *plans) get(key policy.Key) (PolicyPlan, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	plan, ok := p.byKey[key]
	return plan, ok
}

// keep keeps what a dry-run sync of the policy found.
func (p *plans) keep(key policy.Key, changes inventory.ChangeSet, err error, held string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byKey == nil {
		p.byKey = map[policy.Key]PolicyPlan{}
	}
	// Triggers come from the caches in no order: a plan lists by object.
	slices.SortStableFunc(changes.Changes, func(a, b inventory.Change) int { return strings.Compare(a.ID, b.ID) })
	p.byKey[key] = PolicyPlan{Policy: key.String(), Changes: changes, Err: err, Held: held}
}

// Plan computes, for every policy the sources deliver, what a sync would
// write and prune now, from the cluster as it is and the policy's record
// (so admission and activation are those a running Sprout has), and writes
// nothing. The controller must have been made with Options.DryRun. Plans
// come in policy order.
func (c *Controller) Plan(ctx context.Context) ([]PolicyPlan, error) {
	if !c.opts.DryRun {
		return nil, errors.New("Plan needs a controller made with Options.DryRun")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // the informers stop with it, then stop waits for them
		c.stop()
	}()
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	for _, src := range c.opts.Sources {
		if src.Complete() {
			continue
		}
		st := c.tell.Sources().LastCheck(src.Name())
		if st.Err != nil {
			return nil, fmt.Errorf("%s: %w", src.Name(), st.Err)
		}
		return nil, errors.New(src.Name() + ": no revision could be read")
	}
	c.mu.RLock()
	keys := make([]policy.Key, 0, len(c.policies))
	for key := range c.policies {
		keys = append(keys, key)
	}
	c.mu.RUnlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	out := make([]PolicyPlan, 0, len(keys))
	for _, key := range keys {
		if err := c.pipeline.syncWhenReady(ctx, key); err != nil && ctx.Err() != nil {
			return nil, err
		}
		p, ok := c.pipeline.planned.get(key)
		if !ok {
			p = PolicyPlan{Policy: key.String(), Err: errors.New("not planned")}
		}
		out = append(out, p)
	}
	return out, nil
}

// syncWhenReady syncs a policy, waiting for the caches it needs.
func (s *syncer) syncWhenReady(ctx context.Context, key policy.Key) error {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		err := s.sync(ctx, key)
		if !errors.Is(err, errWaiting) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// adoptRecordedIdentity gives a policy planned from files the identity its
// record holds, so the plan uses the admissions and activation of the
// policy of that name that runs now, wherever it comes from.
func (c *Controller) adoptRecordedIdentity(p sources.Policy) {
	if rec := c.ledger.Record(policy.KeyOf(p.Policy)); rec != nil && rec.Spec.Policy.UID != "" {
		p.SetUID(types.UID(rec.Spec.Policy.UID))
	}
}
