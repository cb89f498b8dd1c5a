package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/inventory"
)

// errWaiting ends a sync that cannot run before a cache has synced; the
// policy is queued again shortly, without counting as a failure.
var errWaiting = errors.New("waiting for caches to sync")

// trigger is one admitted, matching trigger object.
type trigger struct {
	gvr    schema.GroupVersionResource
	object *cachedObject
	// deleted marks a tombstone: the trigger's last state, replayed once as
	// a DELETE for a policy that lists DELETE.
	deleted bool
	// memo is what the policy's evaluations know of object; nil for a
	// tombstone.
	memo *triggerMemo
}

// sync makes the cluster hold what one policy wants, computed from the
// informer caches as they are now. Phases: load the compiled policy → find
// its admitted, matching triggers → evaluate and apply, a part of the
// triggers at a time, watching and recording the resources each part
// writes before it is applied (generate) → prune what is no longer desired
// → report status.
func (c *Controller) sync(ctx context.Context, key policyKey) error {
	start := time.Now()
	c.mu.RLock()
	cp, gone := c.policies[key], c.deleted[key]
	c.mu.RUnlock()
	if cp == nil {
		if gone != (retired{}) {
			return c.finalize(ctx, key, gone)
		}
		return nil
	}
	if err := cp.program.Err(); err != nil {
		// Terminal until the policy changes: retrying cannot fix a typo. The
		// record carries it too: for a policy from files it is the only status.
		out := outcome{reason: ReasonCompileFailed, err: err}
		c.plan(key, inventory.ChangeSet{}, err)
		before := c.previousReady(key, cp)
		recordErr := c.saveRecord(ctx, key, cp)
		c.reportLater(key, cp, out)
		c.metrics.observeSync(key.String(), time.Since(start).Seconds(), out, inventory.ChangeSet{}, nil)
		c.policyEvents(key, cp, before, out, inventory.ChangeSet{}, nil)
		return recordErr
	}
	if blocked(cp.resolveErr) || (len(cp.triggers) == 0 && cp.resolveErr != nil) {
		// Discovery failed, the account may not read a trigger, or nothing
		// the rules name is served (yet): a CRD installed or a permission
		// granted since is found by looking again.
		cp = c.resolveAgain(key, cp)
		if blocked(cp.resolveErr) {
			// Which triggers exist is unknown: nothing can be decided.
			c.reportLater(key, cp, outcome{reason: ReasonMatchFailed, err: cp.resolveErr, granted: c.verdict(ctx, key, cp)})
			if c.waitsForPermission(cp.resolveErr) {
				// Not retried: an RBAC change queues it (recheckPermissions).
				return nil
			}
			return cp.resolveErr
		}
	}
	if !c.triggersSynced(cp) {
		return errWaiting
	}
	outer := ctx
	ctx, end := c.beginSync(ctx, key, cp)
	defer end()

	phase := c.metrics.phases()
	triggers, unmatched, matchErr := c.matchingTriggers(cp)
	if errors.Is(matchErr, errWaiting) {
		return errWaiting
	}
	phase.done("match")
	tombstones := c.tombstones.pending(key)
	triggers = append(triggers, tombstones...)
	as, asErr := c.serviceAccountFor(cp.policy)
	if asErr != nil {
		// Terminal until the policy or the flag changes, like a compile error.
		out := outcome{reason: ReasonCompileFailed, err: asErr, granted: &grantVerdict{err: asErr}}
		c.plan(key, inventory.ChangeSet{}, asErr)
		c.reportLater(key, cp, out)
		return c.saveRecord(ctx, key, cp)
	}
	w, err := c.writerFor(as)
	if err != nil {
		return err
	}
	reader := newCacheReader(c, as, cp.scope())
	g, err := c.generate(ctx, key, cp, triggers, w, reader, phase)
	c.setDependencies(key, reader.resources())
	if ctx.Err() != nil && outer.Err() == nil {
		// The policy was deleted: its last sync, queued, prunes what this
		// one wrote; nothing more is written for it.
		c.log.Info("sync stopped: policy deleted", "policy", key.String())
		return nil
	}
	c.guard.remember(key, g.verdicts, err == nil)
	if err != nil {
		return err
	}
	if g.cp != nil {
		cp = g.cp // its beginning rebuilt from its objects
	}
	sync := cp.policy.PolicySpec().Synchronize()
	if sync {
		c.metrics.settled.WithLabelValues(key.String()).Set(float64(g.settled))
	}
	evalErr, refuseErr, mapErr, applyErr := g.evalErr(), g.refuseErr(), g.mapErr, g.applyErr
	for _, uid := range unmatched {
		g.failed.Insert(string(uid))
	}
	if applyErr == nil {
		// Generated once, never again; one that failed is tried again.
		c.tombstones.done(key, slices.DeleteFunc(tombstones, func(t trigger) bool { return g.failed.Has(string(t.object.uid)) }))
	}

	// Prune only after a desired set known for every trigger that did not
	// fail, and an apply without error: an object missing from a partial
	// set is not unwanted, only unknown. A trigger that failed (its match,
	// its evaluation, a refusal) keeps its objects as they are until it
	// evaluates cleanly again; the other triggers are pruned as usual.
	changes := g.changes
	var pruneErr error
	complete := errors.Join(mapErr, applyErr) == nil
	if c.rebuilds.pending(key) {
		// A record lost: nothing is pruned until the objects have told
		// which triggers the policy generated for, and a sync has matched
		// them all.
		switch {
		case g.relearnt:
			c.queue.Add(key)
			complete = false
		case g.rebuilt && complete:
			c.rebuilds.done(key)
		default:
			complete = false
		}
	}
	if sync && complete {
		c.retainClaims(key, changes)
		var pruned inventory.ChangeSet
		pruned, pruneErr = c.prune(ctx, w, key, cp, g.failed)
		changes.Changes = append(changes.Changes, pruned.Changes...)
		c.own.note(key, pruned)
	}
	// A binding refused for its role goes whatever else the sync found.
	pruned, refusedErr := c.pruneRefused(ctx, w, key, g.verdicts)
	changes.Changes = append(changes.Changes, pruned.Changes...)
	pruneErr = errors.Join(pruneErr, refusedErr)
	phase.done("prune")
	if changes.Written() {
		c.log.Info("applied", "policy", key.String(), "changes", changes)
	}
	var notOwned error
	if s := changes.NotOwned(); s != "" {
		notOwned = fmt.Errorf("not written, not Sprout's for this policy and trigger: %s", s)
	}

	// A refusal, like an object someone else owns, is reported but not
	// retried: only a change to the policy or the cluster can lift it, and
	// either queues the policy again.
	out := outcome{triggers: g.matched, objects: g.objects, failed: g.failed.Len(), err: errors.Join(cp.resolveErr, matchErr, evalErr, refuseErr, mapErr, applyErr, pruneErr, notOwned),
		granted: c.verdict(ctx, key, cp)}
	switch {
	case matchErr != nil:
		out.reason = ReasonMatchFailed
	case applyErr != nil || mapErr != nil:
		out.reason = ReasonApplyFailed
	case pruneErr != nil:
		out.reason = ReasonPruneFailed
	case evalErr != nil:
		out.reason = ReasonEvaluationFailed
	case refuseErr != nil:
		out.reason = ReasonRefused
	case notOwned != nil:
		out.reason = ReasonNotOwned
	case cp.resolveErr != nil:
		out.reason = ReasonUnobservableTrigger
	}
	c.plan(key, changes, out.err)
	before := c.previousReady(key, cp)
	// What a non-synchronizing policy generated is recorded now; the
	// outcome goes to the status workers.
	recordErr := c.saveRecord(ctx, key, cp)
	c.reportLater(key, cp, out)
	phase.done("report")
	phase.observe()
	c.metrics.observeSync(key.String(), time.Since(start).Seconds(), out, changes, evalErr)
	c.policyEvents(key, cp, before, out, changes, triggers)
	return errors.Join(matchErr, evalErr, mapErr, applyErr, pruneErr, recordErr)
}

// track records that the policy writes to gvrs and makes sure each is
// watched. It returns how many resources the policy has written to, and
// whether each is in the cache, before which what it owns cannot be known.
//
// An informer just started lists only Sprout's objects of its resource,
// which takes milliseconds: the sync waits for it up to downstreamSyncWait
// rather than going back to the queue and coming back in 100 ms.
func (c *Controller) track(ctx context.Context, key policyKey, gvrs sets.Set[schema.GroupVersionResource]) (int, bool) {
	c.mu.Lock()
	if c.written[key] == nil {
		c.written[key] = sets.New[schema.GroupVersionResource]()
	}
	c.written[key].Insert(gvrs.UnsortedList()...)
	all := c.written[key].Clone()
	c.mu.Unlock()
	c.ensureDownstreamInformers(all)
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, downstreamSyncWait, true, func(context.Context) (bool, error) {
		return c.downstreamsSynced(all), nil
	})
	return len(all), err == nil
}

// downstreamSyncWait bounds how long a sync waits for the informers of the
// resources it writes to list what exists.
const downstreamSyncWait = 2 * time.Second

// triggerExists answers, from the caches, whether a trigger of the policy
// still exists. The triggers' UIDs are gathered at the first question, once
// for the sync that asks: most syncs ask none (an index of every trigger
// by UID, kept all along, would cost memory for every trigger), some ask
// about every trigger they admitted. Answers may be asked for concurrently.
func (c *Controller) triggerExists(cp *compiledPolicy) func(string) bool {
	var uids map[types.UID]struct{} // nil: cannot tell
	gather := sync.OnceFunc(func() {
		found := map[types.UID]struct{}{}
		if c.eachCachedTrigger(cp, func(o *cachedObject) { found[o.uid] = struct{}{} }) {
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
// trigger resources, and reports whether every one of them is watched.
func (c *Controller) eachCachedTrigger(cp *compiledPolicy, fn func(*cachedObject)) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	all := true
	for _, gvr := range cp.triggers {
		ti := c.informer[c.watchKeyOf(cp.scope(), gvr)]
		if ti == nil {
			all = false
			continue
		}
		for _, obj := range ti.informer.GetStore().List() {
			if o, ok := obj.(*cachedObject); ok {
				fn(o)
			}
		}
	}
	return all
}

// notYetGenerated drops the objects a non-synchronizing policy has already
// generated: it generates once per trigger, so a downstream a user deleted
// stays deleted.
func (c *Controller) notYetGenerated(key policyKey, desired []*unstructured.Unstructured) []*unstructured.Unstructured {
	c.mu.RLock()
	done := c.generated[key]
	c.mu.RUnlock()
	var out []*unstructured.Unstructured
	for _, o := range desired {
		if !done.Has(generatedID(inventory.ObjectID(o), o.GetLabels()[inventory.LabelTriggerUID])) {
			out = append(out, o)
		}
	}
	return out
}

// noteGenerated remembers the objects created, or found already there.
func (c *Controller) noteGenerated(key policyKey, changes inventory.ChangeSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.generated[key] == nil {
		c.generated[key] = sets.New[string]()
	}
	for _, ch := range changes.Changes {
		if ch.Action == inventory.Created || ch.Action == inventory.Unchanged || ch.Present() {
			c.generated[key].Insert(generatedID(ch.ID, ch.TriggerUID))
		}
	}
}

func generatedID(objectID, triggerUID string) string { return triggerUID + " " + objectID }

// retainGenerated forgets what was generated for triggers that no longer
// exist, once what they were generated from at their DELETE is done: a gone
// trigger generates nothing again, so the record, in etcd and in memory,
// grows with the live triggers, not with history. exists is asked without
// the lock held: it takes it.
func (c *Controller) retainGenerated(key policyKey, exists func(string) bool) {
	c.mu.RLock()
	ids := c.generated[key].UnsortedList()
	c.mu.RUnlock()
	if len(ids) == 0 {
		return
	}
	pending := sets.New[string]()
	for _, t := range c.tombstones.pending(key) {
		pending.Insert(string(t.object.GetUID()))
	}
	var gone []string
	for _, id := range ids {
		uid, _, _ := strings.Cut(id, " ")
		if !pending.Has(uid) && !exists(uid) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generated[key].Delete(gone...)
}

// prune deletes what the policy owns but its last apply did not want,
// except the objects of the triggers that failed: what they want is
// unknown.
func (c *Controller) prune(ctx context.Context, w writer, key policyKey, cp *compiledPolicy, failed sets.Set[string]) (inventory.ChangeSet, error) {
	owned, err := c.owned(key)
	if err != nil {
		return inventory.ChangeSet{}, err
	}
	stale := slices.DeleteFunc(cp.decisions.Stale(owned), func(o *inventory.Cached) bool { return failed.Has(o.TriggerUID()) })
	return w.Prune(ctx, inventory.Decoded(stale))
}

// finalize is the last sync of a deleted policy. A synchronizing policy that
// does not orphan its objects takes its data objects with it; clones stay,
// as in Kyverno. Then its record goes.
func (c *Controller) finalize(ctx context.Context, key policyKey, gone retired) error {
	if c.opts.DryRun {
		return nil // a plan covers the policies it was given, not retired ones
	}
	if gone.synchronize && !gone.orphan {
		c.mu.RLock()
		written := c.written[key].Clone()
		c.mu.RUnlock()
		if _, ready := c.track(ctx, key, written); !ready {
			return errWaiting
		}
		owned, err := c.ownedLive(ctx, key)
		if err != nil {
			return err
		}
		// It prunes as it wrote: a tenant's policy with its account's rights.
		var as *serviceAccount
		if gone.account != (serviceAccount{}) {
			as = &gone.account
		}
		w, err := c.writerFor(as)
		if err != nil {
			return err
		}
		changes, err := w.Prune(ctx, inventory.Decoded(inventory.Data(owned)))
		if changes.Written() {
			c.log.Info("pruned after policy deletion", "policy", key.String(), "changes", changes)
		}
		if err != nil {
			return err
		}
	}
	if err := c.records.Delete(ctx, gone.ref); err != nil {
		return err
	}
	c.metrics.forget(key.String())
	c.mu.Lock()
	delete(c.deleted, key)
	delete(c.written, key)
	delete(c.generated, key)
	c.own.forget(key)
	c.mu.Unlock()
	c.access.forget(key)
	c.releaseInformers()
	return nil
}

// blocked reports whether resolving a policy's rules failed in a way that
// leaves its triggers unknown until a later sync asks again.
func blocked(resolveErr error) bool {
	var discoveryErr *discoveryError
	var permErr *permissionError
	return errors.As(resolveErr, &discoveryErr) || errors.As(resolveErr, &permErr)
}

// waitsForPermission reports whether a policy blocked by resolveErr only
// waits for a permission that an RBAC change will grant: it need not be
// retried, as long as RBAC changes are watched.
func (c *Controller) waitsForPermission(resolveErr error) bool {
	var discoveryErr *discoveryError
	var permErr *permissionError
	return c.rbacWatched.Load() && !errors.As(resolveErr, &discoveryErr) &&
		errors.As(resolveErr, &permErr) && !permErr.failed
}

// resolveAgain resolves a policy's rules again after a discovery failure.
func (c *Controller) resolveAgain(key policyKey, cp *compiledPolicy) *compiledPolicy {
	next := *cp
	next.triggers, next.refused, next.resolveErr = c.resolveRules(cp.policy)
	c.mu.Lock()
	if c.policies[key] == cp {
		c.policies[key] = &next
	}
	c.mu.Unlock()
	c.ensureTriggerInformers(next.scope(), next.triggers)
	return &next
}

// triggersSynced reports whether every trigger informer of the policy has
// listed its objects: before that the cache would look empty.
func (c *Controller) triggersSynced(cp *compiledPolicy) bool {
	if !c.namespacesSynced(cp.triggers) {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, gvr := range cp.triggers {
		ti, ok := c.informer[c.watchKeyOf(cp.scope(), gvr)]
		if !ok || !ti.informer.HasSynced() {
			return false
		}
	}
	return true
}

// matchingTriggers lists, from the caches, the triggers the policy matches
// now and has admitted: every match with generateExisting, otherwise those
// created since the policy's activation or admitted by an event. They come
// in the caches' order, which is none.
func (c *Controller) matchingTriggers(cp *compiledPolicy) ([]trigger, []types.UID, error) {
	key := keyOf(cp.policy)
	// Settings the policy had before, whose admissions are not listed yet.
	before, changed := c.admitted.derivedBy(key)
	changed = changed && before != cp.derives
	confined := ""
	if cp.policy.IsNamespaced() {
		confined = cp.policy.GetNamespace()
	}
	var out []trigger
	var errs []error
	var failed []types.UID // triggers whose match failed
	self := 0              // the policy's own objects, passed over
	defer func() { c.reportSelfTriggers(key, cp, self) }()
	for _, gvr := range cp.triggers {
		c.mu.RLock()
		ti := c.informer[c.watchKeyOf(cp.scope(), gvr)]
		c.mu.RUnlock()
		if ti == nil {
			return nil, nil, errWaiting // released meanwhile by a policy change
		}
		cached := ti.informer.GetStore().List()
		out = slices.Grow(out, len(cached))
		for _, obj := range cached {
			u := obj.(*cachedObject)
			m := cp.evaluations.of(u)
			if confined != "" && m.namespace != confined {
				continue
			}
			if m.deleting {
				continue // being deleted: gone, as far as generation goes
			}
			derived := derives(cp.derives, m.created, cp.activated)
			listed := c.admitted.admitted(key, m.uid)
			derivedBefore := changed && derives(before, m.created, cp.activated)
			if !derived && !listed && !derivedBefore {
				continue
			}
			ok, err := c.selects(cp, gvr, u, m)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: match: %w", u.GetKind(), objectRef(u), err))
				failed = append(failed, m.uid)
				continue
			}
			if !ok {
				if m.self {
					self++
				}
				continue
			}
			if derivedBefore && !derived && !listed {
				// Admitted by settings the policy no longer has: listed, so
				// it stays admitted while it exists, whatever becomes of
				// generateExisting or the operations.
				c.admitted.admit(key, m.uid)
			}
			out = append(out, trigger{gvr: gvr, object: u, memo: m})
		}
	}
	exists := c.triggerExists(cp)
	c.admitted.retain(key, func(uid types.UID) bool { return exists(string(uid)) })
	c.retainGenerated(key, exists)
	if len(errs) == 0 {
		// Every trigger the old settings admitted is listed now.
		c.admitted.setDerivedBy(key, cp.derives)
	}
	return out, failed, joinSorted(errs)
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
func (c *Controller) selects(cp *compiledPolicy, gvr schema.GroupVersionResource, u *cachedObject, m *triggerMemo) (bool, error) {
	ns := c.namespaceNamed(m.namespace)
	if m.matchKnown && m.matchNamespace == ns {
		return m.selected && !(m.self && c.generatedBy(keyOf(cp.policy), u)), nil
	}
	crit := cp.criteria.state
	ok, err := c.matcher.matches(crit, gvr, admission.Create, u.kind.Value(), u.selectable(crit.readsLabels()))
	if err != nil {
		return false, err
	}
	// Whether the labels say the policy made u is kept with the match;
	// whether it did is asked at each sync, as the policy writes.
	m.matchKnown, m.selected, m.self, m.matchNamespace = true, ok, ok && labelledBy(cp, u), ns
	return ok && !(m.self && c.generatedBy(keyOf(cp.policy), u)), nil
}

// namespaceNamed returns the cached Namespace of that name; nil for "" or
// one not cached.
func (c *Controller) namespaceNamed(name string) *corev1.Namespace {
	if name == "" {
		return nil
	}
	obj, _ := c.namespaces.Get(name)
	return obj
}

// evaluate runs the policy's program for one trigger, replayed as its last
// event: a CREATE, an UPDATE with the state before it as oldObject (kept for
// policies that read it), or, for a tombstone, a DELETE with the last state
// as oldObject. A result kept from an earlier sync for the same inputs is
// returned as it is, and kept says so.
func (c *Controller) evaluate(ctx context.Context, cp *compiledPolicy, t trigger, reader celenv.Reader, epoch uint64) (ev evaluation, m *triggerMemo, kept bool, err error) {
	cached := t.object
	op := admission.Create
	var oldObject *cachedObject
	switch {
	case t.deleted:
		op = admission.Delete
	case cp.program.ReadsEvent():
		// The trigger's last event was an UPDATE: replay it with the state
		// before it, as a webhook would have seen it.
		if prev := c.lastUpdate(c.watchKeyOf(cp.scope(), t.gvr), cached.uid); prev != nil {
			op, oldObject = admission.Update, prev
		}
	}
	m = t.memo
	if m == nil && !t.deleted {
		m = cp.evaluations.of(cached)
	}
	var nsObject *corev1.Namespace
	if m != nil {
		nsObject = c.namespaceNamed(m.namespace)
		// A tombstone has no memo: it is evaluated once, never kept. A
		// settled evaluation whose objects changed in the cache is
		// evaluated again, so that they are compared in full.
		if ev := m.evaluated; ev != nil && ev.old == oldObject && ev.namespace == nsObject && ev.op == op && c.stillHolds(ev, epoch) {
			return *ev, m, true, nil
		}
	} else {
		nsObject = c.namespaceNamed(cached.namespace)
	}

	// Decoded for this evaluation alone: a program only reads its inputs,
	// and what it generates is made of new maps (celenv's conversion of its
	// values), never of theirs.
	u := cached.object()
	in := celenv.Input{
		Object: u.Object,
		Request: celenv.Request{
			UID:       string(u.GetUID()),
			Operation: string(op),
			Name:      u.GetName(),
			Namespace: u.GetNamespace(),
			Kind:      u.GroupVersionKind(),
			Resource:  t.gvr,
		},
		Scopes:  scopes{c},
		Reader:  reader,
		Timeout: c.opts.EvaluationTimeout,
	}
	if nsObject != nil {
		var err error
		in.NamespaceObject, err = toUnstructured(nsObject, corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err != nil {
			return evaluation{}, m, false, err
		}
	}
	if t.deleted {
		in.Object, in.OldObject = nil, in.Object
	} else if oldObject != nil {
		in.OldObject = oldObject.object().Object
	}
	res, err := cp.program.Evaluate(ctx, in)
	if err != nil {
		return evaluation{}, m, false, err
	}
	var objs []*unstructured.Unstructured
	if res.Matched {
		if len(res.MissingSources) > 0 {
			c.log.Info("clone sources not found", "policy", keyOf(cp.policy).String(),
				"trigger", u.GetKind()+" "+objectRef(u), "sources", res.MissingSources)
		}
		objs = Label(cp.policy, u, res.Objects)
	}
	for _, o := range objs {
		if t.deleted {
			inventory.MarkGeneratedOnDelete(o)
		}
		inventory.Stamp(o) // final: kept results are shared by later syncs
	}
	ev = evaluation{old: oldObject, namespace: nsObject, op: op, objects: objs, matched: res.Matched}
	for _, o := range objs {
		ev.kinds = append(ev.kinds, inventory.KindOf(o))
	}
	if m != nil {
		m.evaluated = nil
		if res.Reproducible {
			m.evaluated = &ev
		}
	}
	return ev, m, false, nil
}

// stillHolds reports whether the objects a kept evaluation settled, if any,
// are still in the cache as settled, at the policy's downstream event
// count epoch.
func (c *Controller) stillHolds(ev *evaluation, epoch uint64) bool {
	switch {
	case ev.settled.Len() == 0, ev.settledAt == epoch && !ev.awaiting:
		return true
	case ev.settled.Holds(liveObjects{c}):
		// Held at this count: no lookup until the next event, once every
		// object is cached.
		ev.settledAt, ev.awaiting = epoch, ev.settled.Pending()
		return true
	}
	return false
}

// Label returns the generated objects with the labels that tie each to its
// policy, its trigger and, for clones, its source.
func Label(policy apiv1.Policy, trigger *unstructured.Unstructured, generated []celenv.Generated) []*unstructured.Unstructured {
	origin := inventory.Origin{
		Policy:     celenv.PolicyRef(policy),
		PolicyName: policy.GetName(),
		Trigger: inventory.ObjectRef{
			GVK: trigger.GroupVersionKind(), Namespace: trigger.GetNamespace(), Name: trigger.GetName(), UID: trigger.GetUID(),
		},
	}
	if policy.IsNamespaced() {
		origin.PolicyNamespace = policy.GetNamespace()
	}
	out := make([]*unstructured.Unstructured, 0, len(generated))
	for _, g := range generated {
		o := origin
		if src := g.ClonedFrom; src != nil {
			o.Source = &inventory.ObjectRef{
				GVK:       schema.FromAPIVersionAndKind(src.APIVersion, src.Kind),
				Namespace: src.Namespace, Name: src.Name, UID: types.UID(src.UID),
			}
		}
		inventory.Label(g.Object, o)
		out = append(out, g.Object)
	}
	return out
}

func objectRef(u interface {
	GetNamespace() string
	GetName() string
}) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// scopes answers celenv's question, namespaced or not, from the REST mapper.
type scopes struct{ c *Controller }

func (s scopes) IsNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := s.c.restMapping(gvk)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
