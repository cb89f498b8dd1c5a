package reconcile

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
	"github.com/sprout-gitops/sprout/reconcile/report"
)

// The blast-radius guard: a new revision of a policy that would delete, or
// overwrite fields of, more of its live objects than its threshold writes
// its creations only, and is Stalled until the revision is approved.
// docs/sync.md says when to use it; docs/decisions.md what counts as a
// revision.
const (
	// AnnotationBlastRadius on a policy is its threshold: a count ("10"),
	// a percentage of its live objects ("20%"), or "off"; it overrides
	// Options.BlastRadius.
	AnnotationBlastRadius = "sprout.dev/blast-radius"
	// AnnotationApprovedRevision on a policy names the revision (Revision)
	// whose deletions and overwrites may go beyond the threshold.
	AnnotationApprovedRevision = "sprout.dev/approved-revision"
	// ReasonBlastRadiusExceeded: a revision's deletions and overwrites are
	// held until it is approved.
	ReasonBlastRadiusExceeded = report.ReasonBlastRadiusExceeded
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

// blastRadius is a threshold: at most count objects, or percent of the
// live ones; off holds nothing.
type blastRadius struct {
	count   int
	percent bool
	off     bool
}

// ValidateBlastRadius checks a threshold as Options.BlastRadius takes it.
func ValidateBlastRadius(v string) error {
	_, err := parseBlastRadius(v)
	return err
}

// parseBlastRadius reads a threshold: a count ("10"), a percentage
// ("20%"), or "off" (also "").
func parseBlastRadius(v string) (blastRadius, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "off" {
		return blastRadius{off: true}, nil
	}
	num, percent := strings.CutSuffix(v, "%")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || percent && n > 100 {
		return blastRadius{}, fmt.Errorf("%q is not a count (10), a percentage (20%%) or off", v)
	}
	return blastRadius{count: n, percent: percent}, nil
}

// exceeded reports whether held deletions and overwrites of live objects
// go beyond the threshold.
func (b blastRadius) exceeded(held, live int) bool {
	switch {
	case b.off:
		return false
	case b.percent:
		return held*100 > b.count*live
	}
	return held > b.count
}

func (b blastRadius) String() string {
	if b.percent {
		return strconv.Itoa(b.count) + "%"
	}
	return strconv.Itoa(b.count)
}

// guardFor returns the guard of run's sync, or nil when nothing is held:
// the policy does not synchronize (it never overwrites or deletes), its
// threshold is off, its objects are synced to this revision already (a
// resync's drift repair is not held), none were ever (a new policy, or a
// record from before the guard), or the revision is approved.
func (s *syncer) guardFor(run *syncRun, w writer) *guard {
	cp := run.cp
	if !cp.Policy.PolicySpec().Synchronize() {
		return nil
	}
	limit, err := s.blastRadiusOf(cp)
	applied, _ := s.states.Of(run.key).Ledger().Applied()
	switch {
	case err == nil && limit.off, applied == "", applied == run.revision:
		return nil
	case cp.Policy.GetAnnotations()[AnnotationApprovedRevision] == run.revision:
		return nil
	}
	g := &guard{real: w, limit: limit, limitErr: err, dryRun: s.dryRun}
	// A running controller's writers are Appliers, a plan's their dry runs
	// (writerOf).
	switch w := w.(type) {
	case *inventory.Applier:
		g.dry = w.DryRun()
	case inventory.DryRun:
		g.dry = w
	default:
		panic(fmt.Sprintf("blast-radius guard: no dry run of a %T", w))
	}
	return g
}

// blastRadiusOf is a policy's threshold: its annotation's, or the flag's.
// A bad annotation holds every deletion and overwrite, and says why.
func (s *syncer) blastRadiusOf(cp *policy.Compiled) (blastRadius, error) {
	v, ok := cp.Policy.GetAnnotations()[AnnotationBlastRadius]
	if !ok {
		return parseBlastRadius(s.blastRadius)
	}
	b, err := parseBlastRadius(v)
	if err != nil {
		return blastRadius{}, fmt.Errorf("metadata.annotations[%s]: %w", AnnotationBlastRadius, err)
	}
	return b, nil
}

// guard is the writer of a sync of a revision not yet applied: it writes
// what creates an object at once, and holds what would overwrite or
// delete one until the sync knows how many there are (release).
type guard struct {
	real, dry writer
	limit     blastRadius
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

var _ writer = (*guard)(nil)

// unguarded is the writer under w: what no guard holds (a binding refused
// for its role goes whatever the revision).
func unguarded(w writer) writer {
	if g, ok := w.(*guard); ok {
		return g.real
	}
	return w
}

// Apply asks the API server what applying objects would do (the dry run
// takes the round's part, so the objects held still count as desired),
// then writes the objects it would create, and holds those it would
// change. An object the dry run failed on fails, unwritten.
func (g *guard) Apply(ctx context.Context, objects []*unstructured.Unstructured, live inventory.Live, opts inventory.ApplyOptions) (inventory.ChangeSet, error) {
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
func (g *guard) Prune(ctx context.Context, objects []*unstructured.Unstructured) (inventory.ChangeSet, error) {
	planned, err := inventory.DryRun{}.Prune(ctx, objects)
	if g.dryRun {
		g.hold(nil, planned.Changes, inventory.ApplyOptions{}, nil, nil)
		return planned, err
	}
	g.hold(nil, planned.Changes, inventory.ApplyOptions{}, nil, objects)
	return inventory.ChangeSet{}, err
}

// hold keeps what a write held, and its dry run's changes.
func (g *guard) hold(overwrites []*unstructured.Unstructured, planned []inventory.Change, opts inventory.ApplyOptions, live inventory.Live, deletes []*unstructured.Unstructured) {
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

// heldError is why a revision's deletions and overwrites were not
// written: it stalls the policy until the revision is approved.
type heldError struct{ msg string }

func (e *heldError) Error() string { return e.msg }

// release ends a guarded sync, once its applies and prunes are done:
// within the threshold of live objects, what was held is written now;
// beyond it, nothing of it is, and the held error says what would change.
// A plan's changes already hold what is held.
func (g *guard) release(ctx context.Context, run *syncRun, live int, changes inventory.ChangeSet) (_ inventory.ChangeSet, err, held error) {
	n := len(g.planned)
	slices.SortFunc(g.planned, func(a, b inventory.Change) int { return strings.Compare(a.ID, b.ID) })
	if n > 0 && (g.limitErr != nil || g.limit.exceeded(n, live)) {
		return changes, nil, &heldError{msg: g.message(run, n, live)}
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

// releaseHeld ends the sync of a guarded revision: what it held is
// written, or, beyond the threshold, held for good.
//
// The policy's objects are those it had at its last sync of the applied
// revision: what the new revision creates does not dilute a percentage,
// so each sync of it judges alike. A record from before that count counts
// what the sync found.
func (s *syncer) releaseHeld(ctx context.Context, run *syncRun, gd *guard, changes inventory.ChangeSet) (_ inventory.ChangeSet, err, held error) {
	_, live := s.states.Of(run.key).Ledger().Applied()
	if live == 0 {
		live = changes.Count(inventory.Unchanged) + len(gd.planned)
	}
	changes, err, held = gd.release(ctx, run, live, changes)
	if held != nil {
		s.log.Info("revision held by its blast radius", "policy", run.key.String(), "revision", run.revision, "held", len(gd.planned))
	} else if len(gd.planned) > 0 {
		s.log.Info("applied", "policy", run.key.String(), "changes", changes)
	}
	return changes, err, held
}

// message says what a held revision would change: the counts, the first
// objects, and how to approve it.
func (g *guard) message(run *syncRun, held, live int) string {
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
	fmt.Fprintf(&b, "revision %s would delete %d and overwrite %d of the policy's %d objects", run.revision, deletes, held-deletes, live)
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
	approve := "sprout approve " + run.key.Kind + "/" + run.key.Name
	if run.key.Namespace != "" {
		approve += " -n " + run.key.Namespace
	}
	fmt.Fprintf(&b, "; not written until the revision is approved: %s, or the annotation %s: %q", approve, AnnotationApprovedRevision, run.revision)
	return b.String()
}
