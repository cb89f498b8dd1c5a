package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// resolveAgain resolves a policy's rules again after a discovery failure.
func (c *Controller) resolveAgain(key policy.Key, cp *policy.Compiled) *policy.Compiled {
	next := *cp
	next.Triggers, next.Refused, next.ResolveErr = c.rights.Resolve(c.ctx, cp.Policy)
	c.mu.Lock()
	if c.policies[key] == cp {
		c.policies[key] = &next
	}
	c.mu.Unlock()
	c.intake.ensureInformers(c.intake.triggerKeys(&next)...)
	return &next
}

// triggersSynced reports whether every trigger informer of the policy has
// listed its objects: before that the cache would look empty.
func (c *Controller) triggersSynced(cp *policy.Compiled) bool {
	if !c.intake.namespacesSynced(cp.Triggers) {
		return false
	}
	for _, gvr := range cp.Triggers {
		if store, synced := c.intake.triggers.Store(c.intake.triggerKeyOf(cp, gvr)); store == nil || !synced {
			return false
		}
	}
	return true
}

// matchingTriggers lists, from the caches, the triggers the policy matches
// now and has admitted: every match with generateExisting, otherwise those
// created since the policy's activation or admitted by an event. They come
// in the caches' order, which is none.
func (c *Controller) matchingTriggers(cp *policy.Compiled) ([]policy.Trigger, []types.UID, error) {
	key := policy.KeyOf(cp.Policy)
	ms := c.matchSettingsOf(key, cp)
	var out []policy.Trigger
	var errs []error
	var failed []types.UID // triggers whose match failed
	self := 0              // the policy's own objects, passed over
	defer func() { c.reportSelfTriggers(key, cp, self) }()
	for _, gvr := range cp.Triggers {
		store, _ := c.intake.triggers.Store(c.intake.triggerKeyOf(cp, gvr))
		if store == nil {
			return nil, nil, errWaiting // released meanwhile by a policy change
		}
		cached := store.List()
		out = slices.Grow(out, len(cached))
		for _, obj := range cached {
			u := obj.(*cluster.Object)
			m := cp.Evaluations.Of(u)
			ok, isSelf, err := c.matchOne(key, cp, gvr, u, m, ms)
			switch {
			case err != nil:
				errs = append(errs, err)
				failed = append(failed, m.UID)
			case isSelf:
				self++
			case ok:
				out = append(out, policy.Trigger{GVR: gvr, Object: u, Memo: m})
			}
		}
	}
	exists := c.triggerExists(cp)
	st := c.states.of(key)
	st.ledger().RetainAdmitted(func(uid types.UID) bool { return exists(string(uid)) })
	st.ledger().RetainGenerated(st.tombstoned, exists)
	if len(errs) == 0 {
		// Every trigger the old settings admitted is listed now.
		c.states.of(key).ledger().SetDerivedBy(cp.Derives)
	}
	return out, failed, joinSorted(errs)
}

// matchSettings are what deciding a policy's admissions needs beside the
// trigger: the namespace it is confined to, and the settings it had
// before (changed), whose admissions are not listed yet.
type matchSettings struct {
	confined string
	before   sproutv1alpha1.DerivedAdmissions
	changed  bool
}

func (c *Controller) matchSettingsOf(key policy.Key, cp *policy.Compiled) matchSettings {
	before, changed := c.states.of(key).ledger().DerivedBy()
	ms := matchSettings{before: before, changed: changed && before != cp.Derives}
	if cp.Policy.IsNamespaced() {
		ms.confined = cp.Policy.GetNamespace()
	}
	return ms
}

// matchOne reports whether the policy has admitted trigger u and its match
// constraints select it now; self, when they do not because the policy
// generated u.
func (c *Controller) matchOne(key policy.Key, cp *policy.Compiled, gvr schema.GroupVersionResource, u *cluster.Object, m *policy.Memo, ms matchSettings) (ok, self bool, err error) {
	if ms.confined != "" && m.Namespace != ms.confined || m.Deleting {
		return false, false, nil // being deleted: gone, as far as generation goes
	}
	derived := policy.Derived(cp.Derives, m.Created, cp.Activated)
	listed := c.states.of(key).ledger().IsAdmitted(m.UID)
	derivedBefore := ms.changed && policy.Derived(ms.before, m.Created, cp.Activated)
	if !derived && !listed && !derivedBefore {
		return false, false, nil
	}
	ok, err = c.selects(cp, gvr, u, m)
	if err != nil {
		return false, false, fmt.Errorf("%s %s: match: %w", u.GetKind(), objectRef(u), err)
	}
	if !ok {
		return false, m.Self, nil
	}
	if generatedByPolicies(cp, u) {
		return false, false, nil
	}
	if derivedBefore && !derived && !listed {
		// Admitted by settings the policy no longer has: listed, so
		// it stays admitted while it exists, whatever becomes of
		// generateExisting or the operations.
		c.states.of(key).ledger().Admit(m.UID)
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
func (c *Controller) selects(cp *policy.Compiled, gvr schema.GroupVersionResource, u *cluster.Object, m *policy.Memo) (bool, error) {
	ns := c.eval.Namespace(m.Namespace)
	if m.MatchKnown && m.MatchNamespace == ns {
		return m.Selected && !(m.Self && c.states.of(policy.KeyOf(cp.Policy)).ledger().GeneratedBy(u)), nil
	}
	crit := cp.Criteria.State
	ok, err := c.eval.Match(crit, gvr, admission.Create, u.GroupVersionKind(), u.Selectable(crit.ReadsLabels()))
	if err != nil {
		return false, err
	}
	// Whether the labels say the policy made u is kept with the match;
	// whether it did is asked at each sync, as the policy writes.
	m.MatchKnown, m.Selected, m.Self, m.MatchNamespace = true, ok, ok && ledger.LabelledBy(cp, u), ns
	return ok && !(m.Self && c.states.of(policy.KeyOf(cp.Policy)).ledger().GeneratedBy(u)), nil
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

// triggerExists answers, from the caches, whether a trigger of the policy
// still exists. The triggers' UIDs are gathered at the first question, once
// for the sync that asks: most syncs ask none (an index of every trigger
// by UID, kept all along, would cost memory for every trigger), some ask
// about every trigger they admitted. Answers may be asked for concurrently.
func (c *Controller) triggerExists(cp *policy.Compiled) func(string) bool {
	var uids map[types.UID]struct{} // nil: cannot tell
	gather := sync.OnceFunc(func() {
		found := map[types.UID]struct{}{}
		if c.eachCachedTrigger(cp, func(o *cluster.Object) { found[o.GetUID()] = struct{}{} }) {
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
func (c *Controller) eachCachedTrigger(cp *policy.Compiled, fn func(*cluster.Object)) bool {
	all := true
	for _, gvr := range cp.Triggers {
		store, _ := c.intake.triggers.Store(c.intake.triggerKeyOf(cp, gvr))
		if store == nil {
			all = false
			continue
		}
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
// the managed fields that show Sprout wrote its origin, not by labels
// anyone may copy. Two policies that generate each other's triggers then
// stop after one round.
func generatedByPolicies(cp *policy.Compiled, u *cluster.Object) bool {
	return u.OriginWritten() && cp.Policy.PolicySpec().SkipBackgroundRequests()
}
