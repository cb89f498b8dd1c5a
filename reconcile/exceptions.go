package reconcile

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// ReasonPolicySkipped is the Event reason, Kyverno's, of triggers a
// PolicyException skipped.
const ReasonPolicySkipped = "PolicySkipped"

// exceptionStore holds the PolicyExceptions of every source, and, for each
// policy, those that name it.
type exceptionStore struct {
	mu       sync.Mutex
	bySource map[string][]sources.Exception
	// sets are the exceptions of each policy, made on first use after a
	// change to them: a new set is a new pointer, which is how a kept
	// evaluation knows it was made under other exceptions.
	sets map[policy.Key]*policy.Exceptions
	// told is the last PolicySkipped message of each policy, so that an
	// unchanged one is not repeated at every sync.
	told map[policy.Key]string
}

// Exceptions takes the exceptions of a source, whole, when PolicyExceptions
// are enabled: those outside Options.ExceptionNamespace are left out, as
// Kyverno leaves them. The policies named by an exception that came, went
// or changed are queued, and evaluated again under the new set.
func (h policyHandler) Exceptions(source string, list []sources.Exception) {
	c := h.c
	if !c.opts.PolicyExceptions {
		return
	}
	kept := make([]sources.Exception, 0, len(list))
	for _, e := range list {
		if ns := c.opts.ExceptionNamespace; ns != "" && ns != "*" && e.Namespace != ns {
			continue
		}
		if e.Err != nil {
			c.log.Error("policy exception does not compile: the policies it names are held until it does", "exception", e.Namespace+"/"+e.Name, "source", source, "error", e.Err.Error())
		}
		kept = append(kept, e)
	}
	x := &c.exceptions
	x.mu.Lock()
	if x.bySource == nil {
		x.bySource, x.sets, x.told = map[string][]sources.Exception{}, map[policy.Key]*policy.Exceptions{}, map[policy.Key]string{}
	}
	changed := changedExceptions(x.bySource[source], kept)
	x.bySource[source] = kept
	for key := range x.sets {
		if names(changed, key) {
			delete(x.sets, key)
		}
	}
	x.mu.Unlock()
	var queue []policy.Key
	c.mu.Lock()
	for key := range c.policies {
		if names(changed, key) {
			queue = append(queue, key)
		}
	}
	c.mu.Unlock()
	for _, key := range queue {
		c.queue.Add(key)
	}
}

// changedExceptions returns the exceptions in one list and not the other,
// the same exception being the same compiled one.
func changedExceptions(before, after []sources.Exception) []sources.Exception {
	in := func(list []sources.Exception, e sources.Exception) bool {
		return slices.ContainsFunc(list, func(o sources.Exception) bool { return o.Compiled == e.Compiled })
	}
	var out []sources.Exception
	for _, e := range before {
		if !in(after, e) {
			out = append(out, e)
		}
	}
	for _, e := range after {
		if !in(before, e) {
			out = append(out, e)
		}
	}
	return out
}

// names reports whether one of the exceptions names the policy of key.
func names(list []sources.Exception, key policy.Key) bool {
	return slices.ContainsFunc(list, func(e sources.Exception) bool {
		return slices.ContainsFunc(e.Spec.PolicyRefs, func(r apiv1.PolicyRef) bool { return r.Kind == key.Kind && r.Name == key.Name })
	})
}

// exceptionsFor returns the exceptions that name the policy and have not
// expired, nil when there are none or exceptions are off.
func (c *Controller) exceptionsFor(key policy.Key, p apiv1.Policy) *policy.Exceptions {
	if !c.opts.PolicyExceptions {
		return nil
	}
	x := &c.exceptions
	x.mu.Lock()
	defer x.mu.Unlock()
	now := time.Now()
	if s, ok := x.sets[key]; ok && (s.Until.IsZero() || now.Before(s.Until)) {
		return s
	}
	if x.sets == nil {
		return nil
	}
	var all []sources.Exception
	for _, source := range sortedKeys(x.bySource) {
		all = append(all, x.bySource[source]...)
	}
	s := &policy.Exceptions{}
	s.List, s.Until = sources.Applying(all, p, now)
	if !s.Until.IsZero() {
		// The policy evaluates again without the exception once it
		// expires. A timer, not the queue's AddAfter: the queue keeps one
		// delay per key, the soonest, and a back-off pending for the
		// policy would drop this one.
		time.AfterFunc(time.Until(s.Until)+time.Second, func() { c.queue.Add(key) })
	}
	x.sets[key] = s
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// skipped are the triggers exceptions skipped in one sync, by UID, with the
// exceptions that skipped each (namespace/name), for the report.
type skipped map[string]skippedTrigger

type skippedTrigger struct {
	trigger    string
	exceptions []string
}

// skip notes that exceptions skipped trigger t: its objects are kept, as
// Kyverno keeps them, and not pruned.
func (g *generation) skip(t policy.Trigger, exceptions []string) {
	if g.skipped == nil {
		g.skipped = skipped{}
	}
	g.skipped[string(t.Object.GetUID())] = skippedTrigger{trigger: t.Object.GetKind() + " " + objectRef(t.Object), exceptions: exceptions}
}

// skippedEvent tells, on the policy, which triggers exceptions skipped,
// once for each different set: a sync that skips the same triggers again
// says nothing.
func (c *Controller) skippedEvent(key policy.Key, cp *policy.Compiled, s skipped) {
	msg := describeSkipped(s)
	x := &c.exceptions
	x.mu.Lock()
	same := x.told[key] == msg
	if x.told != nil {
		x.told[key] = msg
	}
	x.mu.Unlock()
	if same || msg == "" || c.opts.DryRun {
		return
	}
	if ref := c.tell.Reference(key, cp); ref != nil {
		c.tell.Event(ref, corev1.EventTypeNormal, ReasonPolicySkipped, msg)
	}
}

// describeSkipped names up to eventObjects of the triggers skipped, and by
// which exceptions.
func describeSkipped(s skipped) string {
	if len(s) == 0 {
		return ""
	}
	all := make([]skippedTrigger, 0, len(s))
	for _, t := range s {
		all = append(all, t)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].trigger < all[j].trigger })
	var parts []string
	for _, t := range all[:min(len(all), eventObjects)] {
		parts = append(parts, fmt.Sprintf("%s (PolicyException %s)", t.trigger, strings.Join(t.exceptions, ", ")))
	}
	msg := fmt.Sprintf("%d trigger(s) skipped due to policy exceptions: %s", len(s), strings.Join(parts, "; "))
	if more := len(s) - eventObjects; more > 0 {
		msg += fmt.Sprintf(" and %d more", more)
	}
	return msg
}

// held are the triggers whose objects a prune keeps: those that failed and
// those exceptions skipped.
func (g *generation) held() sets.Set[string] {
	if len(g.skipped) == 0 {
		return g.failed
	}
	held := g.failed.Clone()
	for uid := range g.skipped {
		held.Insert(uid)
	}
	return held
}
