package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/queue"
	"github.com/sprout-gitops/sprout/reconcile/report"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// triggerMatcher finds, from the trigger informers' caches, the triggers a
// policy has admitted and its match constraints select now, and rebuilds
// its admissions from its objects when its record was lost.
type triggerMatcher struct {
	loop      syncLoop
	checks    syncAccess
	watch     triggerWatches
	informers *watches.Triggers
	eval      *evaluate.Evaluator
	ledger    *ledger.Ledger
	tell      *report.Teller
	states    *states
	log       *slog.Logger
	dryRun    bool
	// maxChain bounds the chains of policies a trigger may come of, and
	// chains keeps what was told of them (chain.go).
	maxChain int
	chains   *chainReports
}

// triggerWatches is what the matcher asks of the trigger informers'
// keeping: which informer serves a policy's triggers, and starting them.
type triggerWatches interface {
	triggerKeyOf(cp *policy.Compiled, gvr schema.GroupVersionResource) watchKey
	triggerKeys(cp *policy.Compiled) []watchKey
	ensureInformers(keys ...watchKey)
	namespacesSynced(triggers []schema.GroupVersionResource) bool
}

// resolveAgain resolves a policy's rules again after a discovery failure.
func (m *triggerMatcher) resolveAgain(key policy.Key, cp *policy.Compiled) *policy.Compiled {
	next := *cp
	next.Triggers, next.Refused, next.ResolveErr = m.checks.resolveRules(cp.Policy)
	m.loop.replace(key, cp, &next)
	m.watch.ensureInformers(m.watch.triggerKeys(&next)...)
	return &next
}

// triggersReadable reports whether the policy's triggers can be matched:
// every trigger informer has listed its objects (before that its cache
// would look empty), or is listing them and hands them out as they come
// (listing).
func (m *triggerMatcher) triggersReadable(cp *policy.Compiled) (ok, listing bool) {
	if !m.watch.namespacesSynced(cp.Triggers) {
		return false, false
	}
	for _, gvr := range cp.Triggers {
		key := m.watch.triggerKeyOf(cp, gvr)
		store, synced := m.informers.Store(key)
		switch {
		case store == nil:
			return false, false
		case !synced && m.informers.Listing(key) == nil:
			return false, false
		case !synced:
			listing = true
		}
	}
	return true, listing
}

// matching is a match of every trigger of a policy, taken a part at a
// time (next) so that a full sync applies its first part before it has
// matched the last trigger: at start, with every trigger new, matching
// them all first held the first object back by as long as that took. A
// trigger informer still listing hands its objects out as they come, and
// the rest from its cache once listed: a trigger listed exists, so what it
// wants may be written before the list ends; only a prune needs the whole
// list, and it comes after the whole match. The triggers come in the
// caches' order, which is none. done ends it; a sync that stops early
// still matches the rest there, so that the round of memos and what the
// ledger keeps are those of a whole match.
type matching struct {
	m       *triggerMatcher
	ctx     context.Context
	key     policy.Key
	cp      *policy.Compiled
	ms      matchSettings
	sources []*watches.Source
	gvrs    []schema.GroupVersionResource
	// at is the source next goes on with.
	at int
	// candidates counts the cached objects, matched or not, as far as
	// known: those of a source still listing are not.
	candidates int
	errs       []error
	failed     []types.UID // triggers whose match failed
	self       int         // the policy's own objects, passed over
	// stopped is why the match ended before every trigger was looked at:
	// the sync's end, or an informer released meanwhile.
	stopped error
	// holds, when set, tells the matching triggers whose objects the
	// caches hold: deferred, handed out after every other (next).
	holds    func(types.UID) bool
	deferred []policy.Trigger
	// newFirst: a restart's first match. The triggers known changed since
	// the policy's record was last written (Source.Fresh) come at once;
	// the others wait in undecided until the caches of the objects the
	// policy generated have listed (synced, listed), when holds can tell
	// them. Caches that do not list in time stop the match (errWaiting):
	// holds would tell nothing, and the whole list would go first.
	newFirst  bool
	synced    chan struct{}
	listed    bool
	undecided []policy.Trigger
	// freshPart: every trigger next returned last was known changed.
	freshPart bool
}

// matchingTriggers begins a match of the triggers the policy matches now
// and has admitted: every match with generateExisting, otherwise those
// created since the policy's activation or admitted by an event. ctx ends
// a wait for the objects of a list. newFirst hands out the triggers whose
// objects the caches hold after every other.
func (m *triggerMatcher) matchingTriggers(ctx context.Context, cp *policy.Compiled, newFirst bool) (*matching, error) {
	key := policy.KeyOf(cp.Policy)
	mt := &matching{m: m, ctx: ctx, key: key, cp: cp, ms: m.matchSettingsOf(key, cp)}
	for _, gvr := range cp.Triggers {
		src, ok := m.informers.Source(m.watch.triggerKeyOf(cp, gvr))
		if !ok {
			return nil, errWaiting // released meanwhile by a policy change
		}
		mt.sources, mt.gvrs = append(mt.sources, src), append(mt.gvrs, gvr)
	}
	mt.candidates = watches.Cached(mt.sources)
	if newFirst {
		// The record's own revision marks its last write: the triggers
		// changed since are found by a watch from it, before the list
		// brings them. Revisions are one etcd's, so this compares two
		// resources' (which the API does not promise): only an order of
		// the match rests on it, and a revision refused finds nothing.
		catchingUp := false
		if rec := m.ledger.Record(key); rec != nil {
			for _, src := range mt.sources {
				catchingUp = src.CatchUp(rec.GetResourceVersion()) || catchingUp
			}
		}
		mt.newFirst = true
		if !catchingUp {
			// Nothing comes first: the match waits for the caches, which
			// a first start, that has written nothing, does not.
			if _, listed := m.ledger.Track(ctx, key, nil); !listed {
				return nil, errWaiting
			}
			mt.holds = m.ledger.Holds(key)
			return mt, nil
		}
		mt.synced = make(chan struct{})
		_, synced := m.ledger.Watch(key, nil) // the caches Holds reads; applies wait for them too
		go func() {
			mt.listed = synced(ctx)
			close(mt.synced)
		}()
	}
	return mt, nil
}

// decided reports whether holds can tell the triggers that are not known
// changed: always, but in a restart's first match before the caches of
// the policy's objects have listed. Caches that did not list stop the
// match (errWaiting), undecided.
func (mt *matching) decided() bool {
	if !mt.newFirst || mt.holds != nil {
		return true
	}
	select {
	case <-mt.synced:
	default:
		return false
	}
	if !mt.listed {
		if mt.stopped == nil {
			mt.stopped = errWaiting
		}
		return false
	}
	mt.holds = mt.m.ledger.Holds(mt.key)
	return true
}

// await waits for the caches of the policy's objects, or, while moved is
// open, for the list to move on; false when the match stopped meanwhile.
func (mt *matching) await(moved <-chan struct{}) bool {
	select {
	case <-mt.synced:
	case <-moved:
	case <-mt.ctx.Done():
		mt.stopped = mt.ctx.Err()
		return false
	}
	return true
}

// next returns up to n more matching triggers; none when every trigger
// has been looked at. It waits for a list's objects only while it has none
// to return. An error stops the match (stopped). Triggers whose objects
// the caches hold come once every other has (deferred): a trigger created
// while Sprout was stopped is not written for after a restart's whole list.
// In a restart's first match, a part of triggers known changed comes
// before those caches have listed (freshPart), and its writes need not
// wait for them: such a trigger is most likely new.
func (mt *matching) next(n int) ([]policy.Trigger, error) {
	var out []policy.Trigger
	fresh := true
	add := func(t policy.Trigger, isFresh bool) {
		if out == nil {
			out = make([]policy.Trigger, 0, n)
		}
		out, fresh = append(out, t), fresh && isFresh
	}
	defer func() { mt.freshPart = len(out) > 0 && fresh }()
	for mt.stopped == nil && len(out) < n {
		if len(mt.undecided) > 0 && mt.decided() {
			t := mt.undecided[0]
			mt.undecided = mt.undecided[1:]
			if mt.holds(t.Memo.UID) {
				mt.deferred = append(mt.deferred, t)
			} else {
				add(t, false)
			}
			continue
		}
		if mt.stopped != nil {
			break // the caches did not list
		}
		if mt.at == len(mt.sources) {
			if len(out) > 0 || len(mt.undecided) == 0 || !mt.await(nil) {
				break
			}
			continue
		}
		src := mt.sources[mt.at]
		moved := src.Moved()
		select {
		case <-moved:
			moved = nil // the list has ended: only the caches move the match on
		default:
		}
		wait := len(out) == 0 && mt.decided()
		if mt.stopped != nil {
			break
		}
		u, got, err := src.Next(mt.ctx, wait)
		if errors.Is(err, watches.ErrReleased) || errors.Is(err, watches.ErrNotListed) {
			err = errWaiting // released by a policy change, or the list is not in
		}
		gvr := mt.gvrs[mt.at]
		switch {
		case err != nil:
			mt.stopped = err
			return out, err
		case got == cluster.NotYet && len(out) == 0 && !wait:
			// Nothing to return, and what the list brings cannot be
			// decided yet: until the caches list, only a trigger known
			// changed can be handed out.
			if !mt.await(moved) {
				return out, mt.stopped
			}
			continue
		case got == cluster.NotYet:
			return out, nil
		case got == cluster.Ended:
			mt.at++
			continue
		}
		memo := mt.cp.Evaluations.Of(u)
		ok, isSelf, err := mt.m.matchOne(mt.key, mt.cp, gvr, u, memo, mt.ms)
		t := policy.Trigger{GVR: gvr, Object: u, Memo: memo}
		switch {
		case err != nil:
			mt.errs = append(mt.errs, err)
			mt.failed = append(mt.failed, memo.UID)
		case isSelf:
			mt.self++
		case !ok:
		case !mt.newFirst || src.Fresh():
			add(t, src.Fresh())
		case !mt.decided():
			mt.undecided = append(mt.undecided, t)
		case mt.holds(memo.UID):
			mt.deferred = append(mt.deferred, t)
		default:
			add(t, false)
		}
	}
	if len(out) == 0 && mt.stopped == nil { // every trigger looked at
		k := min(n, len(mt.deferred))
		out, mt.deferred = mt.deferred[:k:k], mt.deferred[k:]
		fresh = false
	}
	return out, mt.stopped
}

// exhausted reports whether every trigger has been looked at and handed out.
func (mt *matching) exhausted() bool {
	if len(mt.deferred) > 0 || len(mt.undecided) > 0 {
		return false
	}
	if mt.at == len(mt.sources) {
		return true
	}
	return mt.at == len(mt.sources)-1 && mt.sources[mt.at].Exhausted()
}

// all returns every matching trigger not returned yet; after the match
// stopped, none.
func (mt *matching) all() []policy.Trigger {
	var out []policy.Trigger
	for mt.stopped == nil && !mt.exhausted() {
		part, _ := mt.next(max(mt.candidates, maxPart))
		out = append(out, part...)
	}
	return out
}

// done ends the match: it returns the triggers whose match failed and
// the error of each, and keeps what the whole match found.
func (mt *matching) done() ([]types.UID, error) {
	m, st := mt.m, mt.m.states.Of(mt.key)
	if mt.stopped == nil {
		m.reportSelfTriggers(mt.key, mt.cp, mt.self)
	}
	if mt.stopped == nil {
		// A match cut short may have met a list that does not come:
		// what is gone is forgotten by the next whole one.
		exists := m.triggerExists(mt.ctx, mt.cp)
		st.Ledger().RetainAdmitted(func(uid types.UID) bool { return exists(string(uid)) })
		st.Ledger().RetainGenerated(st.Tombstoned, exists)
	}
	if len(mt.errs) == 0 && mt.stopped == nil {
		// Every trigger the old settings admitted is listed now.
		st.Ledger().SetDerivedBy(mt.cp.Derives)
	}
	return mt.failed, joinSorted(mt.errs)
}

// matchSettings are what deciding a policy's admissions needs beside the
// trigger: the namespace it is confined to, and the settings it had
// before (changed), whose admissions are not listed yet.
type matchSettings struct {
	confined string
	before   sproutv1alpha1.DerivedAdmissions
	changed  bool
}

func (m *triggerMatcher) matchSettingsOf(key policy.Key, cp *policy.Compiled) matchSettings {
	before, changed := m.states.Of(key).Ledger().DerivedBy()
	ms := matchSettings{before: before, changed: changed && before != cp.Derives}
	if cp.Policy.IsNamespaced() {
		ms.confined = cp.Policy.GetNamespace()
	}
	return ms
}

// matchOne reports whether the policy has admitted trigger u and its match
// constraints select it now; self, when they do not because the policy
// generated u.
func (m *triggerMatcher) matchOne(key policy.Key, cp *policy.Compiled, gvr schema.GroupVersionResource, u *cluster.Object, memo *policy.Memo, ms matchSettings) (ok, self bool, err error) {
	if ms.confined != "" && memo.Namespace != ms.confined || memo.Deleting {
		return false, false, nil // being deleted: gone, as far as generation goes
	}
	order := m.states.Of(key).Ledger().Order(cp, memo.UID, memo.Created, u.GetResourceVersion())
	derived := policy.Derived(cp.Derives, memo.Created, cp.Activated, order)
	listed := m.states.Of(key).Ledger().IsAdmitted(memo.UID)
	derivedBefore := ms.changed && policy.Derived(ms.before, memo.Created, cp.Activated, order)
	admitted := derived || listed || derivedBefore
	// One that predates the policy is matched even when not admitted, to
	// be kept as predating (Predate) while its version still says so.
	if !admitted && order != policy.Before {
		return false, false, nil
	}
	ok, err = m.selects(cp, gvr, u, memo)
	if err != nil {
		return false, false, fmt.Errorf("%s %s: match: %w", u.GetKind(), objectRef(u), err)
	}
	if !ok {
		return false, admitted && memo.Self, nil
	}
	if generatedByPolicies(cp, u) || m.stopsChain(key, cp, u) {
		return false, false, nil
	}
	if order == policy.Before {
		m.states.Of(key).Ledger().Predate(memo.UID)
	}
	if !admitted {
		return false, false, nil
	}
	if derivedBefore && !derived && !listed {
		// Admitted by settings the policy no longer has: listed, so
		// it stays admitted while it exists, whatever becomes of
		// generateExisting or the operations.
		m.states.Of(key).Ledger().Admit(memo.UID)
	}
	return true, false, nil
}

// joinSorted joins errors in the order of their messages: triggers come in
// no order, and a status must not change with it.
func joinSorted(errs []error) error {
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// selects reports whether the policy's match constraints, operations
// aside, select trigger u as it is; the answer is kept until u or its
// Namespace change.
func (m *triggerMatcher) selects(cp *policy.Compiled, gvr schema.GroupVersionResource, u *cluster.Object, memo *policy.Memo) (bool, error) {
	ns := m.eval.Namespace(memo.Namespace)
	if memo.MatchKnown && memo.MatchNamespace == ns {
		return memo.Selected && !(memo.Self && m.states.Of(policy.KeyOf(cp.Policy)).Ledger().GeneratedBy(u)), nil
	}
	crit := cp.Listed(cp.Criteria.State) // u is from the informer of cp's triggers
	ok, err := m.eval.Match(crit, gvr, admission.Create, u.GroupVersionKind(), u.Selectable(crit.ReadsLabels()))
	if err != nil {
		return false, err
	}
	// Whether the labels say the policy made u is kept with the match;
	// whether it did is asked at each sync, as the policy writes.
	memo.MatchKnown, memo.Selected, memo.Self, memo.MatchNamespace = true, ok, ok && ledger.LabelledBy(cp, u), ns
	return ok && !(memo.Self && m.states.Of(policy.KeyOf(cp.Policy)).Ledger().GeneratedBy(u)), nil
}

// objectRef names an object as kubectl does: namespace/name, or name.
func objectRef(u interface {
	GetNamespace() string
	GetName() string
}) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// listWait bounds how long a question of triggerExists waits for the
// trigger lists, as a sync waits for the lists of what it writes to.
const listWait = 2 * time.Second

// triggerExists answers, from the caches, whether a trigger of the policy
// still exists. The triggers' UIDs are gathered at the first question, once
// for the sync that asks: most syncs ask none (an index of every trigger
// by UID, kept all along, would cost memory for every trigger), some ask
// about every trigger they admitted. Answers may be asked for concurrently.
//
// A question asked while a trigger list still comes waits for it, up to
// listWait (ctx): a restart writes first for the triggers changed while it
// was stopped, before the lists, and one of them, created again under its
// name, takes over its predecessor's object only if that one is known gone.
func (m *triggerMatcher) triggerExists(ctx context.Context, cp *policy.Compiled) func(string) bool {
	var uids map[types.UID]struct{} // nil: cannot tell
	gather := sync.OnceFunc(func() {
		wait, cancel := context.WithTimeout(ctx, listWait)
		defer cancel()
		for _, gvr := range cp.Triggers {
			if _, listed := m.informers.WaitListed(wait, m.watch.triggerKeyOf(cp, gvr)); !listed {
				return
			}
		}
		found := map[types.UID]struct{}{}
		if m.eachCachedTrigger(cp, func(o *cluster.Object) { found[o.GetUID()] = struct{}{} }) {
			uids = found
		}
	})
	return func(uid string) bool {
		gather()
		if uids == nil {
			return true // cannot tell: assume it does
		}
		_, ok := uids[types.UID(uid)]
		return ok
	}
}

// eachCachedTrigger calls fn with every cached object of the policy's
// trigger resources, and reports whether every one of them is watched and
// listed.
func (m *triggerMatcher) eachCachedTrigger(cp *policy.Compiled, fn func(*cluster.Object)) bool {
	all := true
	for _, gvr := range cp.Triggers {
		store, synced := m.informers.Store(m.watch.triggerKeyOf(cp, gvr))
		if store == nil {
			all = false
			continue
		}
		all = all && synced
		for _, obj := range store.List() {
			if o, ok := obj.(*cluster.Object); ok {
				fn(o)
			}
		}
	}
	return all
}

// generatedByPolicies reports whether u is an object generating policies
// generated, which a policy that skips background requests (Kyverno's
// default) does not trigger on: in Kyverno the background controller's
// requests reach no generating policy, and here what Sprout wrote, told by
// the proof Sprout signed into it (cluster.Object.Proven), not by labels
// or managed fields anyone may write. Two policies that generate each other's triggers then
// stop after one round.
func generatedByPolicies(cp *policy.Compiled, u *cluster.Object) bool {
	return u.Proven() && cp.Policy.PolicySpec().SkipBackgroundRequests()
}

// matchDirty finds, from the caches, the changed triggers the policy has
// admitted and selects now. It returns them, the UIDs of every changed
// trigger, and false when a full sync must decide instead: a match failed,
// a trigger is one of the policy's own objects, or a trigger's resource is
// not one the policy watches now.
func (m *triggerMatcher) matchDirty(run *syncRun, p *queue.Changes, t *tally) ([]policy.Trigger, []types.UID, bool) {
	cp := run.cp
	ms := m.matchSettingsOf(run.key, cp)
	var out []policy.Trigger
	dirty := make([]types.UID, 0, len(p.Triggers))
	for uid, d := range p.Triggers {
		dirty = append(dirty, uid)
		if d.Old != nil {
			cp.Evaluations.Forget(d.Old)
		}
		if d.Key == "" {
			// Known by an object it generated: a trigger the policy does
			// not select now has no desired objects, and its objects go.
			prev, ok := t.ByUID[uid]
			if !ok {
				continue
			}
			if prev.GVR < 0 {
				return nil, nil, false
			}
			d.GVR, d.Key = t.Triggers[prev.GVR], prev.Key
		}
		if !slices.Contains(cp.Triggers, d.GVR) {
			return nil, nil, false
		}
		store, _ := m.informers.Store(m.watch.triggerKeyOf(cp, d.GVR))
		if store == nil {
			return nil, nil, false
		}
		obj, exists, err := store.GetByKey(d.Key)
		u, _ := obj.(*cluster.Object)
		if err != nil || !exists || u == nil || u.GetUID() != uid {
			continue // deleted, or another object by that name: its own event tells
		}
		memo := cp.Evaluations.Keep(u)
		ok, self, err := m.matchOne(run.key, cp, d.GVR, u, memo, ms)
		if err != nil || self {
			// A failed match, or an object of the policy's own among its
			// triggers, which only a full sync counts and reports.
			return nil, nil, false
		}
		if ok {
			out = append(out, policy.Trigger{GVR: d.GVR, Object: u, Memo: memo})
		}
	}
	return out, dirty, true
}
