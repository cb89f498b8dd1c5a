package reconcile

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/sources"
)

// Reasons of the Events a sync emits besides the Ready reasons.
const (
	ReasonGenerated = "Generated"
	ReasonPruned    = "Pruned"
)

// eventObjects is how many objects an Event names before it says "and N more".
const eventObjects = 5

// previousReady returns the policy's Ready condition as it was before this
// sync: on the policy for one stored in the cluster, on its record otherwise.
func (c *Controller) previousReady(key policyKey, cp *compiledPolicy) *metav1.Condition {
	if cp.source == sources.ClusterSourceName {
		return meta.FindStatusCondition(cp.policy.PolicyStatus().Conditions, ConditionReady)
	}
	if rec := c.record(key); rec != nil {
		return meta.FindStatusCondition(rec.Status.Conditions, ConditionReady)
	}
	return nil
}

// policyEvents tells, on the policy (or, for a policy from files, on its
// record), what a sync generated and pruned, and a failure when it is new:
// a sync retried with the same error does not repeat it. With
// Options.TriggerEvents each trigger also hears what was generated for it.
func (c *Controller) policyEvents(key policyKey, cp *compiledPolicy, before *metav1.Condition, out outcome, changes inventory.ChangeSet, triggers []trigger) {
	if c.opts.DryRun {
		return
	}
	ref := c.policyReference(key, cp)
	if ref == nil {
		return
	}
	var written, deleted []inventory.Change
	for _, ch := range changes.Changes {
		switch ch.Action {
		case inventory.Created, inventory.Configured:
			written = append(written, ch)
		case inventory.Deleted:
			deleted = append(deleted, ch)
		}
	}
	if len(written) > 0 {
		c.events.Event(ref, corev1.EventTypeNormal, ReasonGenerated, describeChanges(written))
	}
	if len(deleted) > 0 {
		c.events.Event(ref, corev1.EventTypeNormal, ReasonPruned, describeChanges(deleted))
	}
	if out.reason != "" && out.err != nil && c.failures.changed(key, before, out.reason+": "+out.err.Error()) {
		c.events.Event(ref, corev1.EventTypeWarning, out.reason, out.err.Error())
	}
	if out.reason == "" {
		c.failures.changed(key, nil, "")
	}
	if c.opts.TriggerEvents && len(written) > 0 {
		c.triggerEvents(celenv.PolicyRef(cp.policy), written, triggers)
	}
}

// triggerEvents emits, on each trigger, what the policy generated for it.
func (c *Controller) triggerEvents(policy string, written []inventory.Change, triggers []trigger) {
	byUID := map[string][]inventory.Change{}
	for _, ch := range written {
		byUID[ch.TriggerUID] = append(byUID[ch.TriggerUID], ch)
	}
	for _, tr := range triggers {
		chs := byUID[string(tr.object.GetUID())]
		if len(chs) == 0 || tr.deleted {
			continue
		}
		ref := &corev1.ObjectReference{
			APIVersion: tr.object.GetAPIVersion(), Kind: tr.object.GetKind(),
			Namespace: tr.object.GetNamespace(), Name: tr.object.GetName(), UID: tr.object.GetUID(),
		}
		c.events.Eventf(ref, corev1.EventTypeNormal, ReasonGenerated, "%s: %s", policy, describeChanges(chs))
	}
}

// failures remembers, per policy, the failure last told in an Event. The
// cache may not hold the status a sync just wrote when a quick retry reads
// it, so the policy's condition alone would tell the same failure twice.
type failures struct {
	mu   sync.Mutex
	last map[policyKey]string
}

// changed records failure (reason: message; "" for none) and reports
// whether it differs from the last one, or, after a restart, from the one
// the policy's Ready condition shows.
func (f *failures) changed(key policyKey, before *metav1.Condition, failure string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	last, ok := f.last[key]
	if !ok && before != nil && before.Status == metav1.ConditionFalse {
		last = before.Reason + ": " + before.Message
	}
	if f.last == nil {
		f.last = map[policyKey]string{}
	}
	f.last[key] = failure
	return last != failure
}

// policyReference is the object a policy's Events are about.
func (c *Controller) policyReference(key policyKey, cp *compiledPolicy) *corev1.ObjectReference {
	if cp.source == sources.ClusterSourceName {
		return &corev1.ObjectReference{
			APIVersion: apiv1.GroupVersion.String(), Kind: key.Kind,
			Namespace: key.Namespace, Name: key.Name, UID: cp.policy.GetUID(),
		}
	}
	rec := c.record(key)
	if rec == nil {
		return nil
	}
	return &corev1.ObjectReference{
		APIVersion: sproutv1alpha1.GroupVersion.String(), Kind: sproutv1alpha1.PolicyInventoryKind,
		Name: rec.Name, UID: types.UID(rec.UID),
	}
}

// describeChanges says what was done to which objects, naming a few:
// "created 2, configured 1: ConfigMap/a/x, ConfigMap/b/x, ConfigMap/c/x".
func describeChanges(chs []inventory.Change) string {
	counts := map[inventory.Action]int{}
	ids := make([]string, 0, len(chs))
	for _, ch := range chs {
		counts[ch.Action]++
		ids = append(ids, ch.ID)
	}
	var parts []string
	for _, a := range []inventory.Action{inventory.Created, inventory.Configured, inventory.Deleted} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, counts[a]))
		}
	}
	sort.Strings(ids)
	more := ""
	if len(ids) > eventObjects {
		more = fmt.Sprintf(" and %d more", len(ids)-eventObjects)
		ids = ids[:eventObjects]
	}
	return strings.Join(parts, ", ") + ": " + strings.Join(ids, ", ") + more
}
