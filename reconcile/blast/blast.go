// Package blast owns the blast-radius guard: the content revision of a
// policy, the threshold its annotation or Sprout's flag sets, and the
// writer that, for a revision not yet applied, writes what creates objects
// and holds what would overwrite or delete them until it knows how many
// there are. What a held revision stalls, and how it is approved, is in
// docs/sync.md; what counts as a revision, in docs/decisions.md.
package blast

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

const (
	// AnnotationBlastRadius on a policy is its threshold: a count ("10"),
	// a percentage of its live objects ("20%"), or "off"; it overrides
	// Sprout's --blast-radius.
	AnnotationBlastRadius = "sprout.dev/blast-radius"
	// AnnotationApprovedRevision on a policy names the revision (Revision)
	// whose deletions and overwrites may go beyond the threshold.
	AnnotationApprovedRevision = "sprout.dev/approved-revision"
)

// heldNamed is how many held objects a Stalled message names.
const heldNamed = 5

// Revision is the content revision of a policy: a hash of its spec, the
// same for the policy in Git, in a folder or in the cluster. Metadata
// (labels, annotations) is not part of it, so an approval in an
// annotation does not change what it approves.
func Revision(p apiv1.Policy) string {
	b, err := json.Marshal(p.PolicySpec())
	if err != nil {
		// A spec decoded from JSON always encodes again.
		panic(fmt.Sprintf("policy %s: spec does not encode: %v", p.GetName(), err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Radius is a threshold: at most count objects, or percent of the live
// ones; off holds nothing.
type Radius struct {
	count   int
	percent bool
	off     bool
}

// Validate checks a threshold as --blast-radius takes it.
func Validate(v string) error {
	_, err := Parse(v)
	return err
}

// Parse reads a threshold: a count ("10"), a percentage ("20%"), or "off"
// (also "").
func Parse(v string) (Radius, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "off" {
		return Radius{off: true}, nil
	}
	num, percent := strings.CutSuffix(v, "%")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || percent && n > 100 {
		return Radius{}, fmt.Errorf("%q is not a count (10), a percentage (20%%) or off", v)
	}
	return Radius{count: n, percent: percent}, nil
}

// Of is a policy's threshold: its annotation's, or byDefault's (the
// flag's). A bad annotation is an error naming it.
func Of(p apiv1.Policy, byDefault string) (Radius, error) {
	v, ok := p.GetAnnotations()[AnnotationBlastRadius]
	if !ok {
		return Parse(byDefault)
	}
	b, err := Parse(v)
	if err != nil {
		return Radius{}, fmt.Errorf("metadata.annotations[%s]: %w", AnnotationBlastRadius, err)
	}
	return b, nil
}

// Off reports whether the threshold holds nothing.
func (b Radius) Off() bool { return b.off }

// Exceeded reports whether held deletions and overwrites of live objects
// go beyond the threshold.
func (b Radius) Exceeded(held, live int) bool {
	switch {
	case b.off:
		return false
	case b.percent:
		return held*100 > b.count*live
	}
	return held > b.count
}

func (b Radius) String() string {
	if b.percent {
		return strconv.Itoa(b.count) + "%"
	}
	return strconv.Itoa(b.count)
}

// Writer writes a sync's objects: an inventory.Applier, or its dry run.
type Writer interface {
	Apply(ctx context.Context, objects []*unstructured.Unstructured, live inventory.Live, opts inventory.ApplyOptions) (inventory.ChangeSet, error)
	Prune(ctx context.Context, objects []*unstructured.Unstructured) (inventory.ChangeSet, error)
}

// Guard is the writer of a sync of a revision not yet applied: it writes
// what creates an object at once, and holds what would overwrite or
// delete one until the sync knows how many there are (Release).
type Guard struct {
	real, dry Writer
	limit     Radius
	limitErr  error
	// dryRun: the sync only plans; what is held is planned all the same.
	dryRun bool

	mu sync.Mutex
	// overwrites are the objects held whose apply would change them,
	// with the options of their apply; deletes, those held from a prune.
	overwrites []*unstructured.Unstructured
	opts       inventory.ApplyOptions
	live       inventory.Live
	deletes    []*unstructured.Unstructured
	// planned are the dry run's changes of what is held.
	planned []inventory.Change
}

var _ Writer = (*Guard)(nil)

// New returns the guard of a sync that writes through real, and asks dry
// what a write would do; limit is the policy's threshold, or limitErr why
// it has none, which holds every deletion and overwrite. dryRun: the sync
// only plans.
func New(real, dry Writer, limit Radius, limitErr error, dryRun bool) *Guard {
	return &Guard{real: real, dry: dry, limit: limit, limitErr: limitErr, dryRun: dryRun}
}

// Unguarded is the writer under w: what no guard holds (a binding refused
// for its role goes whatever the revision).
func Unguarded(w Writer) Writer {
	if g, ok := w.(*Guard); ok {
		return g.real
	}
	return w
}

// Apply asks the API server what applying objects would do (the dry run
// takes the round's part, so the objects held still count as desired),
// then writes the objects it would create, and holds those it would
// change. An object the dry run failed on fails, unwritten.
func (g *Guard) Apply(ctx context.Context, objects []*unstructured.Unstructured, live inventory.Live, opts inventory.ApplyOptions) (inventory.ChangeSet, error) {
	planned, err := g.dry.Apply(ctx, objects, live, opts)
	if g.dryRun {
		g.hold(nil, planned.Changes, opts, nil, nil)
		return planned, err
	}
	var write, held []*unstructured.Unstructured
	var out, heldChanges []inventory.Change
	for i, ch := range planned.Changes {
		switch {
		case i >= len(objects) || ch.Action == inventory.Failed:
			out = append(out, ch) // settled, or failed unwritten
		case ch.Action == inventory.Configured:
			held, heldChanges = append(held, objects[i]), append(heldChanges, ch)
		default:
			write = append(write, objects[i])
		}
	}
	g.hold(held, heldChanges, opts, live, nil)
	if len(write) == 0 {
		return inventory.ChangeSet{Changes: out}, err
	}
	// The round has them from the dry run: the write is outside it.
	opts.Round, opts.Settled = nil, nil
	written, werr := g.real.Apply(ctx, write, live, opts)
	return inventory.ChangeSet{Changes: append(out, written.Changes...)}, errors.Join(err, werr)
}

// Prune holds every deletion.
func (g *Guard) Prune(ctx context.Context, objects []*unstructured.Unstructured) (inventory.ChangeSet, error) {
	planned, err := inventory.DryRun{}.Prune(ctx, objects)
	if g.dryRun {
		g.hold(nil, planned.Changes, inventory.ApplyOptions{}, nil, nil)
		return planned, err
	}
	g.hold(nil, planned.Changes, inventory.ApplyOptions{}, nil, objects)
	return inventory.ChangeSet{}, err
}

// hold keeps what a write held, and its dry run's changes.
func (g *Guard) hold(overwrites []*unstructured.Unstructured, planned []inventory.Change, opts inventory.ApplyOptions, live inventory.Live, deletes []*unstructured.Unstructured) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ch := range planned {
		if ch.Action == inventory.Configured || ch.Action == inventory.Deleted {
			g.planned = append(g.planned, ch)
		}
	}
	g.overwrites = append(g.overwrites, overwrites...)
	g.deletes = append(g.deletes, deletes...)
	if len(overwrites) > 0 {
		opts.Round, opts.Settled = nil, nil
		g.opts, g.live = opts, live
	}
}

// Held counts the deletions and overwrites held.
func (g *Guard) Held() int { return len(g.planned) }

// HeldError is why a revision's deletions and overwrites were not
// written: it stalls the policy until the revision is approved.
type HeldError struct{ msg string }

func (e *HeldError) Error() string { return e.msg }

// Release ends a guarded sync of the policy key's revision, once its
// applies and prunes are done: within the threshold of live objects, what
// was held is written now; beyond it, nothing of it is, and the held error
// says what would change. A plan's changes already hold what is held.
func (g *Guard) Release(ctx context.Context, key policy.Key, revision string, live int, changes inventory.ChangeSet) (_ inventory.ChangeSet, err, held error) {
	n := len(g.planned)
	slices.SortFunc(g.planned, func(a, b inventory.Change) int { return strings.Compare(a.ID, b.ID) })
	if n > 0 && (g.limitErr != nil || g.limit.Exceeded(n, live)) {
		return changes, nil, &HeldError{msg: g.message(key, revision, n, live)}
	}
	if g.dryRun {
		return changes, nil, nil
	}
	if len(g.overwrites) > 0 {
		written, werr := g.real.Apply(ctx, g.overwrites, g.live, g.opts)
		changes.Changes, err = append(changes.Changes, written.Changes...), werr
	}
	if len(g.deletes) > 0 {
		pruned, perr := g.real.Prune(ctx, g.deletes)
		changes.Changes, err = append(changes.Changes, pruned.Changes...), errors.Join(err, perr)
	}
	return changes, err, nil
}

// message says what a held revision would change: the counts, the first
// objects, and how to approve it.
func (g *Guard) message(key policy.Key, revision string, held, live int) string {
	var b strings.Builder
	if g.limitErr != nil {
		fmt.Fprintf(&b, "%v; every deletion and overwrite is held: ", g.limitErr)
	}
	deletes := 0
	for _, ch := range g.planned {
		if ch.Action == inventory.Deleted {
			deletes++
		}
	}
	fmt.Fprintf(&b, "revision %s would delete %d and overwrite %d of the policy's %d objects", revision, deletes, held-deletes, live)
	if g.limitErr == nil {
		fmt.Fprintf(&b, ", more than its blast radius of %s", g.limit)
	}
	b.WriteString(": ")
	for i, ch := range g.planned[:min(heldNamed, held)] {
		if i > 0 {
			b.WriteString(", ")
		}
		verb := "overwrite"
		if ch.Action == inventory.Deleted {
			verb = "delete"
		}
		fmt.Fprintf(&b, "%s (%s)", ch.ID, verb)
	}
	if held > heldNamed {
		fmt.Fprintf(&b, " and %d more", held-heldNamed)
	}
	approve := "sprout approve " + key.Kind + "/" + key.Name
	if key.Namespace != "" {
		approve += " -n " + key.Namespace
	}
	fmt.Fprintf(&b, "; not written until the revision is approved: %s, or the annotation %s: %q", approve, AnnotationApprovedRevision, revision)
	return b.String()
}
