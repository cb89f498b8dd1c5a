package reconcile

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// Triggers are evaluated and applied a part at a time: the first part is
// small, so that the first objects are written soon after a sync starts,
// and each next one twice as large, up to maxPart. Up to maxApplying parts
// are applied at once, sharing their round's bound on requests in flight,
// so that the last requests of one part do not hold the next back. Larger
// parts wrote no faster and held more desired objects in full at the peak
// (docs/performance.md).
const (
	firstPart   = 16
	maxPart     = 256
	maxApplying = 2
)

// DefaultTriggersInFlight is how many triggers the full syncs hold
// evaluated and not yet applied, all together: four syncs' worth of parts,
// as many as the default --workers hold. Each part holds its desired
// objects in full until applied, and the API server, not the number of
// syncs, bounds how fast they are written: more workers would only hold
// more at once.
const DefaultTriggersInFlight = 4 * (maxApplying + 1) * maxPart

// maxJoined bounds the parts an incremental sync takes on while its applies
// are under way (joinArrived), so that a stream of events ends it all the
// same: each part it joins is applied beside those before it.
const maxJoined = 16

// joiner is a scope whose sync may take on, while its applies are under
// way, the triggers events changed since it began (incrementalSync).
type joiner interface {
	// join takes them and returns those the policy matches; not ok: it
	// takes no more in this sync.
	join(run *syncRun) (triggers []policy.Trigger, ok bool)
}

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
	// skipped are the triggers PolicyExceptions skipped: their objects are
	// kept too.
	skipped evaluate.Skipped
	// verdicts are the guard's on the roles bindings refer to.
	verdicts *access.Verdicts
	// rebuilt: the policy's admissions were rebuilt from its objects in
	// the resources it writes to (rebuildAdmissions), and the sync's
	// policy is the one rebuilt; relearnt: that rebuild admitted triggers
	// this sync did not match, or moved the policy's beginning, so its
	// desired set is not whole.
	rebuilt, relearnt bool
	// contributions are, per trigger evaluated, what it adds to the counts;
	// reads, what those evaluated cleanly read.
	contributions []contribution
	reads         []watches.TriggerReads
}

func (g *generation) evalErr() error   { return joinSorted(g.evalErrs) }
func (g *generation) refuseErr() error { return joinSorted(g.refuseErrs) }

// parts is generate's loop over the parts of the triggers: what stays the
// same from one part to the next, and what it carries over.
type parts struct {
	run    *syncRun
	g      *generation
	round  *inventory.Round
	w      writer
	reader *evaluate.Reader
	limit  int
	sync   bool
	alive  func(string) bool
	// mapped are the kinds mapped to their resources, with the error of
	// those that could not be.
	mapped map[schema.GroupVersionKind]error
	// applying are the applies under way, in order.
	applying []*partApply
	// recorded are the resources the record named at its last save;
	// rebuiltAt, those the last rebuild looked in.
	recorded, rebuiltAt int
	// updated are the triggers an UPDATE selected since the last sync,
	// whose objects a policy that reappliesOnUpdate applies again.
	updated sets.Set[types.UID]
	// joined counts the parts joinArrived took on, each applied beside
	// those before it.
	joined int
	// fresh: the part is of triggers known changed since the record's
	// last write (matching.freshPart), whose writes do not wait for the
	// caches of the policy's objects.
	fresh bool
}

// generate evaluates the policy for its triggers and applies what they
// generate, a part of the triggers at a time. The next part is evaluated
// while the last ones are applied, and what an applied part settled is
// released when its apply ends: a large sync starts writing after the
// first part's evaluations, and holds the objects of three parts in full,
// not those of every trigger.
//
// Before a part is applied, the resources it writes are watched and the
// record names them and every admitted trigger (write-ahead: a crash right
// after an apply leaves nothing unfound and forgets no admission). An
// error of that, or caches still syncing, stops the sync: the parts
// applied stay applied, and nothing is pruned.
//
// An incremental sync then takes on, while its applies are under way, the
// triggers events change meanwhile (joinArrived): a slow write for one
// trigger does not hold back the next ones' objects until it ends.
func (s *syncer) generate(ctx context.Context, run *syncRun, w writer, reader *evaluate.Reader, sc scope) (_ *generation, retErr error) {
	cp := run.cp
	src := partSource(&sliceParts{triggers: run.triggers})
	size := len(run.triggers)
	var matched *matchedParts
	if mt := run.matching; mt != nil {
		matched = &matchedParts{run: run}
		src, size = matched, mt.candidates+len(run.tombstones)
	}
	// Most policies generate one object a trigger.
	g := &generation{changes: inventory.ChangeSet{Changes: make([]inventory.Change, 0, size)}, verdicts: access.NewVerdicts(), failed: sets.New[string]()}
	run.decisions = cp.Decisions
	if run.incremental {
		// The policy's decisions stand for its whole desired set: an
		// incremental sync decides, and prunes, with a round of its own.
		run.decisions = inventory.NewDecisions()
	} else {
		defer cp.Evaluations.EndRound()
	}
	if matched != nil {
		defer func() { s.endMatch(run, matched.tombstonesTaken) }() // before the round ends
	}
	ps := &parts{run: run, g: g, round: run.decisions.Begin(), w: w, reader: reader, sync: cp.Policy.PolicySpec().Synchronize(),
		alive: s.matcher.triggerExists(ctx, cp), mapped: map[schema.GroupVersionKind]error{}, recorded: -1}
	defer ps.round.End()
	limit, err := s.checks.maxObjects(cp)
	if err != nil {
		g.evalErrs = append(g.evalErrs, err)
		src = &sliceParts{} // nothing is evaluated, and nothing pruned
	}
	ps.limit = limit
	if reappliesOnUpdate(cp) {
		st := s.states.Of(run.key)
		ps.updated = st.TakeUpdated()
		defer func() {
			if retErr != nil { // stopped before every part was applied
				for uid := range ps.updated {
					st.Updated(uid)
				}
			}
		}()
	}
	defer func() {
		// On every return: the applies under way end first, then the round.
		for _, p := range ps.applying {
			s.finish(p, ps)
		}
		run.phase.Done("apply")
	}()
	j, joins := sc.(joiner)
	joins = joins && run.incremental && !reappliesOnUpdate(cp) && err == nil
	for size, last := firstPart, false; !last; size = min(2*size, maxPart) {
		if err := ctx.Err(); err != nil {
			return g, err // stopped: the policy deleted, or Sprout stopping
		}
		var part []policy.Trigger
		var err error
		part, last, err = src.next(size)
		if err != nil {
			return g, err // the sync ended, or an informer was released
		}
		if matched != nil {
			ps.fresh = run.matching.freshPart
			// A list taken as it came is counted once in the cache: the
			// changes are sized then, not grown object by object.
			run.matching.candidates = watches.Cached(run.matching.sources)
			if want := run.matching.candidates + len(run.tombstones); want > cap(g.changes.Changes) {
				g.changes.Changes = slices.Grow(g.changes.Changes, want-len(g.changes.Changes))
			}
		}
		if err := s.generatePart(ctx, ps, part, last && !joins); err != nil {
			return g, err
		}
	}
	if joins {
		return g, s.joinArrived(ctx, ps, j)
	}
	return g, nil
}

// partSource hands generate its triggers a part at a time: the first
// call returns a part, even an empty one; last says no part follows.
type partSource interface {
	next(size int) (part []policy.Trigger, last bool, err error)
}

// sliceParts are the parts of triggers already matched.
type sliceParts struct {
	triggers []policy.Trigger
	start    int
}

func (p *sliceParts) next(size int) ([]policy.Trigger, bool, error) {
	part := p.triggers[p.start:min(p.start+size, len(p.triggers))]
	p.start += len(part)
	return part, p.start >= len(p.triggers), nil
}

// matchedParts are the parts of a full sync's triggers, each matched as it
// is taken, then its tombstones; each is added to the sync's triggers.
type matchedParts struct {
	run             *syncRun
	tombstonesTaken bool
}

func (p *matchedParts) next(size int) ([]policy.Trigger, bool, error) {
	mt := p.run.matching
	part, err := mt.next(size)
	if err != nil {
		return nil, true, err
	}
	if len(part) == 0 {
		part, p.tombstonesTaken = p.run.tombstones, true
	}
	p.run.triggers = append(p.run.triggers, part...)
	return part, p.tombstonesTaken || len(p.run.tombstones) == 0 && mt.exhausted(), nil
}

// joinArrived waits for the applies under way and meanwhile takes on, as
// parts of their own, the triggers events mark changed (at most maxJoined
// times). Without it, a create the API server holds (a Namespace its own
// cache has not seen yet holds a create in it 50 ms) would hold every
// trigger of the policy that comes after it.
func (s *syncer) joinArrived(ctx context.Context, ps *parts, j joiner) error {
	stop, joining := func() {}, true
	defer func() { stop() }()
	for len(ps.applying) > 0 {
		var arrived <-chan struct{}
		if joining && ps.joined < maxJoined && ctx.Err() == nil {
			stop()
			// Armed before the take: a mark after it wakes the wait.
			arrived, stop = s.loop.arrivals(ps.run.key)
			triggers, ok := j.join(ps.run)
			if !ok {
				joining, arrived = false, nil
			}
			if len(triggers) > 0 {
				ps.joined++
				ps.recorded = -1 // the record names the triggers admitted since
				if err := s.generatePart(ctx, ps, triggers, false); err != nil {
					return err
				}
				continue
			}
		}
		select {
		case <-ps.applying[0].done:
			s.finish(ps.applying[0], ps)
			ps.applying = ps.applying[1:]
		case <-arrived:
		}
		ps.run.phase.Done("apply") // waited for the applies
	}
	return nil
}

// generatePart evaluates one part of the triggers, records the resources
// it writes to and starts its apply. The last part's apply runs on the
// sync's goroutine, which has nothing left to evaluate; the others on
// goroutines kept between syncs (syncer.applies): an incremental sync,
// which may take on more triggers while its apply runs, applies its first
// part there, and a goroutine started for each event grew its stack to a
// request's depth each time.
func (s *syncer) generatePart(ctx context.Context, ps *parts, part []policy.Trigger, last bool) (retErr error) {
	g, run := ps.g, ps.run
	var held int64
	if !run.incremental {
		var err error
		if held, err = s.reserve(ctx, ps, len(part)); err != nil {
			return err
		}
		defer func() {
			if retErr != nil {
				s.inFlight.Release(held)
			}
		}()
	}
	want := s.desired(ctx, run.cp, part, ps.reader, ps.limit, g)
	desired, kinds, refused, err := s.checks.refuse(ctx, run.cp.Policy, want.objects, want.kinds, g.verdicts, g.failed)
	if err != nil {
		return errWaiting // for the caches of roles
	}
	g.refuseErrs = append(g.refuseErrs, refused...)
	gvrs, mapErr := s.cache.resourcesOf(desired, kinds, ps.mapped)
	g.mapErr = errors.Join(g.mapErr, mapErr)
	if g.mapErr != nil {
		failed := map[string]error{}
		for i, o := range desired {
			if err := ps.mapped[kinds[i]]; err != nil {
				failed[o.GetLabels()[sproutv1alpha1.LabelTriggerUID]] = fmt.Errorf("%s: %w", inventory.ObjectID(o), err)
			}
		}
		s.tell.ApplyFailed(run.cp, part, failed)
	}
	run.phase.Done("evaluate")
	if len(ps.applying) >= maxApplying+ps.joined {
		s.finish(ps.applying[0], ps)
		ps.applying = ps.applying[1:]
		run.phase.Done("apply")
	}
	if err := s.recordAhead(ctx, ps, gvrs); err != nil {
		return err
	}
	toWrite, again := desired, []*unstructured.Unstructured(nil)
	if !ps.sync {
		again, toWrite = splitUpdated(desired, ps.updated)
		toWrite = s.states.Of(run.key).Ledger().NotYetGenerated(toWrite)
	}
	claimed := func(triggerUID, id string) bool { return s.states.Of(run.key).Ledger().Claims(triggerUID, id) }
	opts := inventory.ApplyOptions{Synchronize: ps.sync, Alive: ps.alive, Round: ps.round, Settled: want.settled}
	if ps.sync {
		opts.Claimed = claimed
	}
	p := &partApply{want: want, part: part, done: make(chan struct{})}
	apply := func() {
		defer close(p.done)
		if held > 0 {
			// Given back as the apply ends, not when the sync next finishes
			// the part: a sync evaluating its next part would hold it
			// meanwhile.
			defer s.inFlight.Release(held)
		}
		p.changes, p.err = ps.w.Apply(ctx, toWrite, s.live, opts)
		if len(again) > 0 {
			// Applied as a synchronizing policy applies them, once: the
			// policy's fields are put back, other managers' kept.
			ch, err := ps.w.Apply(ctx, again, s.live, inventory.ApplyOptions{Synchronize: true, Alive: ps.alive, Claimed: claimed})
			p.changes.Changes = append(p.changes.Changes, ch.Changes...)
			p.err = errors.Join(p.err, err)
			for _, c := range ch.Changes {
				if c.Action == inventory.Failed { // tried again at the next sync
					s.states.Of(run.key).Updated(types.UID(c.TriggerUID))
				}
			}
		}
	}
	if last {
		apply()
	} else {
		s.applies.Do(apply)
		// Its goroutine, next in this processor's queue, would wait out
		// the next part's evaluation when the other processors are busy.
		runtime.Gosched()
	}
	ps.applying = append(ps.applying, p)
	g.objects += len(desired) + want.settledLen()
	return nil
}

// reserve takes n triggers from the budget the full syncs share before
// their part is evaluated, and returns what it took: all of it, as a part
// is at most maxPart, but for a sync's tombstones, which may be more and
// take the whole budget. A part gives it back as its apply ends. While the
// budget is short, the sync's own applies are finished first; a sync waits
// only with none under way, so every wait ends.
func (s *syncer) reserve(ctx context.Context, ps *parts, n int) (int64, error) {
	w := min(int64(max(n, 1)), s.inFlightSize)
	for !s.inFlight.TryAcquire(w) {
		if len(ps.applying) == 0 {
			if err := s.inFlight.Acquire(ctx, w); err != nil {
				return 0, err
			}
			break
		}
		s.finish(ps.applying[0], ps)
		ps.applying = ps.applying[1:]
		ps.run.phase.Done("apply")
	}
	return w, nil
}

// splitUpdated parts desired objects into those of the triggers updated,
// by the origin label each carries, and the others.
func splitUpdated(desired []*unstructured.Unstructured, updated sets.Set[types.UID]) (of, others []*unstructured.Unstructured) {
	if updated.Len() == 0 {
		return nil, desired
	}
	for _, o := range desired {
		if updated.Has(types.UID(o.GetLabels()[sproutv1alpha1.LabelTriggerUID])) {
			of = append(of, o)
		} else {
			others = append(others, o)
		}
	}
	return of, others
}

// recordAhead names the resources a part writes to in the record while
// their caches list (only the part's writes wait for them; errWaiting), then
// rebuilds a lost record from them, which says so until it is rebuilt.
func (s *syncer) recordAhead(ctx context.Context, ps *parts, gvrs sets.Set[schema.GroupVersionResource]) error {
	run := ps.run
	written, synced := s.ledger.Watch(run.key, gvrs)
	for {
		if written != ps.recorded {
			// Unchanged, a record costs no request, but building it
			// costs a list of every trigger admitted: once per resource.
			if err := s.reporter.record(ctx, run.key, run.cp); err != nil {
				return err
			}
			ps.recorded = written
		}
		// A trigger changed since the record's last write most likely
		// has no object yet: one created is found existing, and read.
		rebuilding := s.states.Of(run.key).Ledger().Rebuilding()
		fresh := ps.fresh && !rebuilding
		if !fresh && !synced(ctx) {
			return errWaiting
		}
		if fresh || written == ps.rebuiltAt || !rebuilding {
			run.phase.Done("record")
			return nil
		}
		// A resource's objects are all in its cache once it is ready:
		// only a part that writes to a new resource can find more.
		ps.rebuiltAt = written
		cp, learnt, err := s.matcher.rebuildAdmissions(ctx, run.key, run.cp)
		if err != nil {
			return err
		}
		run.cp, ps.g.rebuilt, ps.g.relearnt = cp, written > 0, ps.g.relearnt || learnt
		if learnt {
			ps.recorded = -1 // written again with the triggers it admitted
		}
	}
}

// partApply is the apply of one part, under way.
type partApply struct {
	want desiredSet
	// part are the triggers whose objects it writes.
	part    []policy.Trigger
	done    chan struct{}
	changes inventory.ChangeSet
	err     error
}

// finish waits for the apply of a part and takes its changes: the
// objects of a synchronizing policy that the cache showed unchanged, or
// that were created as desired, settle; what a policy that does not
// synchronize created is remembered.
func (s *syncer) finish(p *partApply, ps *parts) {
	g, key := ps.g, ps.run.key
	<-p.done
	g.changes.Changes = append(g.changes.Changes, p.changes.Changes...)
	g.applyErr = errors.Join(g.applyErr, p.err)
	if p.err != nil {
		failed := map[string]error{}
		for _, ch := range p.changes.Changes {
			if ch.Action == inventory.Failed && ch.TriggerUID != "" {
				failed[ch.TriggerUID] = fmt.Errorf("%s: %s", ch.ID, ch.Reason)
			}
		}
		s.tell.ApplyFailed(ps.run.cp, p.part, failed)
	}
	cp, _ := s.loop.policy(key)
	if cp != nil && s.states.Of(key).Ledger().MayTriggerItself(cp) {
		s.states.Of(key).Ledger().NoteOwn(p.changes)
	}
	if ps.sync {
		g.settled += p.want.settledLen() + settle(ps.round, p.want.settling, p.want.epoch)
	} else {
		s.states.Of(key).Ledger().NoteGenerated(p.changes)
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
	settling []*policy.Memo
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
func (s *syncer) desired(ctx context.Context, cp *policy.Compiled, triggers []policy.Trigger, reader *evaluate.Reader, limit int, g *generation) desiredSet {
	out := desiredSet{settled: make([]inventory.Settled, 0, len(triggers))}
	key := policy.KeyOf(cp.Policy)
	out.epoch = s.cache.downstreamEpoch(key)
	evaluated, reused := 0, 0
	defer func() { s.metrics.ObserveEvaluations(key.String(), evaluated, reused) }()
	for _, t := range triggers {
		reads, logged := reader.Reads(), s.reads.Logged(key)
		reader.Record()
		ev, m, kept, err := s.eval.Evaluate(ctx, cp, t, reader, out.epoch)
		tape := reader.Recorded()
		if kept {
			reused++
		} else {
			evaluated++
		}
		n := len(ev.Objects) + ev.Settled.Len()
		if err == nil && n > limit {
			err = fmt.Errorf("generates %d objects, more than the %d one trigger may (--max-objects-per-trigger, or the policy's annotation %s)", n, limit, AnnotationMaxObjectsPerTrigger)
		}
		if !kept {
			s.tell.Trigger(cp, t, ev, err)
		}
		if err != nil {
			g.evalErrs = append(g.evalErrs, fmt.Errorf("trigger %s %s: %w", t.Object.GetKind(), objectRef(t.Object), err))
			g.failed.Insert(string(t.Object.GetUID()))
			continue
		}
		if !tape.Empty() && !t.Deleted {
			g.reads = append(g.reads, tape.Of(t.Object.GetUID(), t.GVR, objectRef(t.Object), logged))
		}
		if len(ev.Excepted) > 0 {
			g.skip(t, ev.Excepted)
			continue
		}
		if ev.Matched {
			g.matched++
		}
		// Not kept and reading no resource: it read the clock or the web,
		// which no event announces.
		volatile := !kept && m != nil && m.Evaluated == nil && reader.Reads() == reads
		g.contributions = append(g.contributions, contribution{UID: t.Object.GetUID(), GVR: t.GVR, Key: objectRef(t.Object),
			Objects: n, Matched: ev.Matched, Volatile: volatile, Memo: m})
		if ev.Settled.Len() > 0 {
			out.settled = append(out.settled, ev.Settled)
			continue
		}
		out.objects = append(out.objects, ev.Objects...)
		out.kinds = append(out.kinds, ev.Kinds...)
		if m != nil && m.Evaluated != nil && len(ev.Objects) > 0 && !access.Rejudged(ev.Kinds) {
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
func settle(round *inventory.Round, memos []*policy.Memo, epoch uint64) int {
	var groups [][]*unstructured.Unstructured
	var settling []*policy.Memo
	for _, m := range memos {
		if ev := m.Evaluated; ev != nil && len(ev.Objects) > 0 {
			groups = append(groups, ev.Objects)
			settling = append(settling, m)
		}
	}
	n := 0
	for i, s := range round.Settle(groups...) {
		if s.Len() == 0 {
			continue
		}
		next := *settling[i].Evaluated
		next.Objects, next.Settled, next.SettledAt, next.Awaiting = nil, s, epoch, s.Pending()
		settling[i].Evaluated = &next
		n += s.Len()
	}
	return n
}
