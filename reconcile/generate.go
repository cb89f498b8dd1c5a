package reconcile

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/inventory"
)

// Triggers are evaluated and applied a part at a time: the first part is
// small, so that the first objects are written soon after a sync starts,
// and each next one twice as large, up to maxPart. Up to maxApplying parts
// are applied at once, sharing their round's bound on requests in flight,
// so that the last requests of one part do not hold the next back. Larger
// parts wrote no faster and held more desired objects in full at the peak
// (docs/performance.md).
const (
	firstPart   = 64
	maxPart     = 256
	maxApplying = 2
)

// generation is what a sync's evaluations and applies gave, part by part.
type generation struct {
	changes inventory.ChangeSet
	// matched counts the triggers whose matchConditions held; objects the
	// objects desired, settled those of them settled.
	matched, objects, settled int
	evalErrs, refuseErrs      []error
	mapErr, applyErr          error
	// failed are the UIDs of the triggers whose evaluation failed or
	// whose objects were refused: what they want is unknown or not
	// written, so their objects are not pruned.
	failed sets.Set[string]
	// verdicts are the guard's on the roles bindings refer to.
	verdicts *verdicts
	// rebuilt: the policy's admissions were rebuilt from its objects in
	// the resources it writes to (rebuildAdmissions); relearnt: that
	// rebuild admitted triggers this sync did not match, or moved the
	// policy's beginning, so its desired set is not whole. cp is then the
	// policy as rebuilt.
	rebuilt, relearnt bool
	cp                *compiledPolicy
}

func (g *generation) evalErr() error   { return joinSorted(g.evalErrs) }
func (g *generation) refuseErr() error { return joinSorted(g.refuseErrs) }

// generate evaluates the policy for its triggers and applies what they
// generate, a part of the triggers at a time. The next part is evaluated
// while the last ones are applied, and what an applied part settled is
// released when its apply ends: a sync of 10,000 triggers starts writing
// after 64 evaluations, and holds the objects of three parts in full, not
// those of every trigger.
//
// Before a part is applied, the resources it writes are watched and the
// record names them and every admitted trigger (write-ahead: a crash right
// after an apply leaves nothing unfound and forgets no admission). An
// error of that, or caches still syncing, stops the sync: the parts
// applied stay applied, and nothing is pruned.
func (c *Controller) generate(ctx context.Context, key policyKey, cp *compiledPolicy, triggers []trigger, w writer, reader celenv.Reader, phase *phases) (*generation, error) {
	// Most policies generate one object a trigger.
	g := &generation{changes: inventory.ChangeSet{Changes: make([]inventory.Change, 0, len(triggers))}, verdicts: newVerdicts(), failed: sets.New[string]()}
	round := cp.decisions.Begin()
	defer round.End()
	defer cp.evaluations.endRound()
	limit, err := c.maxObjects(cp)
	if err != nil {
		g.evalErrs = append(g.evalErrs, err)
		triggers = nil // nothing is evaluated, and nothing pruned
	}
	sync := cp.policy.PolicySpec().Synchronize()
	alive := c.triggerExists(cp)
	mapped := map[schema.GroupVersionKind]bool{}
	var applying []*partApply // under way, in order
	defer func() {
		// On every return: the applies under way end first, then the round.
		for _, p := range applying {
			c.finish(p, round, g, key, sync)
		}
		phase.done("apply")
	}()
	recorded := -1 // resources the record named at the last save
	rebuiltAt := 0 // resources the last rebuild looked in
	for start, size := 0, firstPart; start == 0 || start < len(triggers); size = min(2*size, maxPart) {
		if err := ctx.Err(); err != nil {
			return g, err // stopped: the policy deleted, or Sprout stopping
		}
		part := triggers[start:min(start+size, len(triggers))]
		start += max(len(part), 1)
		want := c.desired(ctx, cp, part, reader, limit, g)
		desired, kinds, refused, err := c.refuse(ctx, want.objects, want.kinds, g.verdicts, g.failed)
		if err != nil {
			return g, err
		}
		g.refuseErrs = append(g.refuseErrs, refused...)
		gvrs, mapErr := c.resourcesOf(desired, kinds, mapped)
		g.mapErr = errors.Join(g.mapErr, mapErr)
		phase.done("evaluate")
		if len(applying) == maxApplying {
			c.finish(applying[0], round, g, key, sync)
			applying = applying[1:]
			phase.done("apply")
		}

		written, ready := c.track(ctx, key, gvrs)
		if ready && written != rebuiltAt && c.rebuilds.pending(key) {
			// Before the record is written from what this sync knows. A
			// resource's objects are all in its cache once it is ready:
			// only a part that writes to a new resource can find more.
			rebuiltAt = written
			var learnt bool
			cp, learnt = c.rebuildAdmissions(key, cp)
			g.rebuilt, g.relearnt, g.cp = written > 0, g.relearnt || learnt, cp
			if learnt {
				recorded = -1
			}
		}
		if written != recorded {
			// Unchanged, a record costs no request, but building it
			// costs a list of every trigger admitted: once per resource.
			if err := c.saveRecord(ctx, key, cp); err != nil {
				return g, err
			}
			recorded = written
		}
		phase.done("record")
		if !ready {
			return g, errWaiting
		}
		toWrite := desired
		if !sync {
			toWrite = c.notYetGenerated(key, desired)
		}
		opts := inventory.ApplyOptions{Synchronize: sync, Alive: alive, Round: round, Settled: want.settled}
		if sync {
			opts.Claimed = c.claimedBy(key)
		}
		p := &partApply{want: want, done: make(chan struct{})}
		go func() {
			defer close(p.done)
			p.changes, p.err = w.Apply(ctx, toWrite, liveObjects{c}, opts)
		}()
		applying = append(applying, p)
		g.objects += len(desired) + want.settledLen()
	}
	return g, nil
}

// partApply is the apply of one part, under way.
type partApply struct {
	want    desiredSet
	done    chan struct{}
	changes inventory.ChangeSet
	err     error
}

// finish waits for the apply of a part and takes its changes: the
// objects of a synchronizing policy that the cache showed unchanged, or
// that were created as desired, settle; what a policy that does not
// synchronize created is remembered.
func (c *Controller) finish(p *partApply, round *inventory.Round, g *generation, key policyKey, sync bool) {
	<-p.done
	g.changes.Changes = append(g.changes.Changes, p.changes.Changes...)
	g.applyErr = errors.Join(g.applyErr, p.err)
	if c.mayTriggerItself(key) {
		c.own.note(key, p.changes)
	}
	if sync {
		g.settled += p.want.settledLen() + c.settle(round, p.want.settling, p.want.epoch)
	} else {
		c.noteGenerated(key, p.changes)
	}
}

// desiredSet is what a policy wants for a part of its triggers, as its
// evaluations give it.
type desiredSet struct {
	// objects are the desired objects in full, with their kinds.
	objects []*unstructured.Unstructured
	kinds   []schema.GroupVersionKind
	// settled are the objects of kept evaluations that the cache still
	// shows as they were confirmed (inventory.Settled).
	settled []inventory.Settled
	// settling are the trigger memos whose kept evaluation gave objects in
	// full, which the apply may confirm.
	settling []*triggerMemo
	// epoch is the policy's downstream event count before evaluation.
	epoch uint64
}

func (d desiredSet) settledLen() int {
	n := 0
	for _, s := range d.settled {
		n += s.Len()
	}
	return n
}

// desired evaluates the policy for triggers and labels each object with
// its origin. A trigger that fails to evaluate, or generates more than
// limit objects, is reported in g and skipped; the others still count.
// The evaluations are counted before their objects are applied.
func (c *Controller) desired(ctx context.Context, cp *compiledPolicy, triggers []trigger, reader celenv.Reader, limit int, g *generation) desiredSet {
	out := desiredSet{settled: make([]inventory.Settled, 0, len(triggers))}
	key := keyOf(cp.policy)
	out.epoch = c.downstreamEpoch(key)
	evaluated, reused := 0, 0
	defer func() { c.metrics.observeEvaluations(key.String(), evaluated, reused) }()
	for _, t := range triggers {
		ev, m, kept, err := c.evaluate(ctx, cp, t, reader, out.epoch)
		if kept {
			reused++
		} else {
			evaluated++
		}
		if n := len(ev.objects) + ev.settled.Len(); err == nil && n > limit {
			err = fmt.Errorf("generates %d objects, more than the %d one trigger may (--max-objects-per-trigger, or the policy's annotation %s)", n, limit, AnnotationMaxObjectsPerTrigger)
		}
		if err != nil {
			g.evalErrs = append(g.evalErrs, fmt.Errorf("trigger %s %s: %w", t.object.GetKind(), objectRef(t.object), err))
			g.failed.Insert(string(t.object.uid))
			continue
		}
		if ev.matched {
			g.matched++
		}
		if ev.settled.Len() > 0 {
			out.settled = append(out.settled, ev.settled)
			continue
		}
		out.objects = append(out.objects, ev.objects...)
		out.kinds = append(out.kinds, ev.kinds...)
		if m != nil && m.evaluated != nil && len(ev.objects) > 0 && settles(ev.kinds) {
			out.settling = append(out.settling, m)
		}
	}
	return out
}

// settle lets each kept evaluation whose objects the round's apply found
// unchanged in the cache, or created as desired, drop them, keeping their
// identities and versions instead (inventory.Settled): the evaluation's
// objects are its largest part, and the cluster holds them already.
// It returns how many objects settled.
func (c *Controller) settle(round *inventory.Round, memos []*triggerMemo, epoch uint64) int {
	var groups [][]*unstructured.Unstructured
	var settling []*triggerMemo
	for _, m := range memos {
		if ev := m.evaluated; ev != nil && len(ev.objects) > 0 {
			groups = append(groups, ev.objects)
			settling = append(settling, m)
		}
	}
	n := 0
	for i, s := range round.Settle(groups...) {
		if s.Len() == 0 {
			continue
		}
		next := *settling[i].evaluated
		next.objects, next.settled, next.settledAt, next.awaiting = nil, s, epoch, s.Pending()
		settling[i].evaluated = &next
		n += s.Len()
	}
	return n
}
