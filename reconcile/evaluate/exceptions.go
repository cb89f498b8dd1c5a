package evaluate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/sources"
)

// exceptionStore holds the PolicyExceptions of every source; nil until the
// first source hands its own.
type exceptionStore struct {
	mu       sync.Mutex
	bySource map[string][]sources.Exception
}

// PolicyExceptions is what one policy keeps of its exceptions between its
// syncs: the set its evaluations run under, made on first use after a
// change to them (a new set is a new pointer, which is how a kept
// evaluation knows it was made under other exceptions), and the skips last
// told. The zero value is ready; a nil one keeps nothing.
type PolicyExceptions struct {
	mu   sync.Mutex
	set  *policy.Exceptions
	told string
}

// TakeExceptions takes the exceptions of a source, whole, when
// PolicyExceptions are enabled: those outside Config.ExceptionNamespace
// are left out, as Kyverno leaves them. It returns whether an exception
// that came, went or changed names a policy: the caller forgets that
// policy's set (PolicyExceptions.Forget) and queues it, to evaluate it
// again under the new set.
func (e *Evaluator) TakeExceptions(source string, list []sources.Exception) (changed func(policy.Key) bool) {
	if !e.cfg.Exceptions {
		return func(policy.Key) bool { return false }
	}
	kept := make([]sources.Exception, 0, len(list))
	for _, x := range list {
		if ns := e.cfg.ExceptionNamespace; ns != "" && ns != "*" && x.Namespace != ns {
			continue
		}
		if x.Err != nil {
			e.cfg.Log.Error("policy exception does not compile: the policies it names are held until it does", "exception", x.Namespace+"/"+x.Name, "source", source, "error", x.Err.Error())
		}
		kept = append(kept, x)
	}
	s := &e.exceptions
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bySource == nil {
		s.bySource = map[string][]sources.Exception{}
	}
	diff := changedExceptions(s.bySource[source], kept)
	s.bySource[source] = kept
	return func(key policy.Key) bool { return names(diff, key) }
}

// NamedByNamespaceReaders returns whether an exception that reads
// namespaceObject names the policy of a key: a change to a trigger's
// Namespace may change which of its triggers that exception skips. The
// exceptions are read once, under the store's lock; the answers use what
// was read.
func (e *Evaluator) NamedByNamespaceReaders() func(policy.Key) bool {
	if !e.cfg.Exceptions {
		return func(policy.Key) bool { return false }
	}
	var readers []sources.Exception
	s := &e.exceptions
	s.mu.Lock()
	for _, list := range s.bySource {
		for _, x := range list {
			if x.Compiled != nil && x.Compiled.ReadsNamespace() {
				readers = append(readers, x)
			}
		}
	}
	s.mu.Unlock()
	return func(key policy.Key) bool { return names(readers, key) }
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
// expired, kept in k; nil when there are none or exceptions are off. The
// store's lock is held while the set is made and kept: a set made from the
// exceptions before a change is not kept after the caller forgot it.
func (e *Evaluator) exceptionsFor(k *PolicyExceptions, key policy.Key, p apiv1.Policy) *policy.Exceptions {
	if !e.cfg.Exceptions {
		return nil
	}
	x := &e.exceptions
	x.mu.Lock()
	defer x.mu.Unlock()
	now := time.Now()
	if s := k.get(); s != nil && (s.Until.IsZero() || now.Before(s.Until)) {
		return s
	}
	if x.bySource == nil {
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
		time.AfterFunc(time.Until(s.Until)+time.Second, func() { e.cfg.Requeue(key) })
	}
	k.keep(s)
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

func (k *PolicyExceptions) get() *policy.Exceptions {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.set
}

func (k *PolicyExceptions) keep(s *policy.Exceptions) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.set = s
}

// Forget forgets the set kept: exceptions that name the policy changed.
func (k *PolicyExceptions) Forget() { k.keep(nil) }

// Tell records what exceptions skipped in a sync, named up to most
// triggers, and returns it with whether to tell it: once for each
// different set, so that a sync that skips the same triggers again says
// nothing.
func (k *PolicyExceptions) Tell(s Skipped, most int) (msg string, tell bool) {
	msg = s.describe(most)
	told := ""
	if k != nil {
		k.mu.Lock()
		told, k.told = k.told, msg
		k.mu.Unlock()
	}
	return msg, told != msg && msg != ""
}

// Skipped are the triggers exceptions skipped in one sync, by UID, with the
// exceptions that skipped each (namespace/name), for the report.
type Skipped map[string]SkippedTrigger

// SkippedTrigger is a trigger exceptions skipped.
type SkippedTrigger struct {
	trigger    string
	exceptions []string
}

// Add notes that exceptions skipped trigger t.
func (s Skipped) Add(t policy.Trigger, exceptions []string) {
	s[string(t.Object.GetUID())] = SkippedTrigger{trigger: t.Object.GetKind() + " " + objectRef(t.Object), exceptions: exceptions}
}

// describe names up to most of the triggers skipped, and by which
// exceptions.
func (s Skipped) describe(most int) string {
	if len(s) == 0 {
		return ""
	}
	all := make([]SkippedTrigger, 0, len(s))
	for _, t := range s {
		all = append(all, t)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].trigger < all[j].trigger })
	var parts []string
	for _, t := range all[:min(len(all), most)] {
		parts = append(parts, fmt.Sprintf("%s (PolicyException %s)", t.trigger, strings.Join(t.exceptions, ", ")))
	}
	msg := fmt.Sprintf("%d trigger(s) skipped due to policy exceptions: %s", len(s), strings.Join(parts, "; "))
	if more := len(s) - most; more > 0 {
		msg += fmt.Sprintf(" and %d more", more)
	}
	return msg
}
