package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/sources"
)

// Reasons of a PolicySource's Ready condition and of its Events.
const (
	ReasonRevisionTaken    = "RevisionTaken"
	ReasonRevisionRejected = "RevisionRejected"
	ReasonCheckFailed      = "CheckFailed"
	ReasonChecking         = "Checking"
	ReasonWatching         = "Watching"
	ReasonPolicyConflict   = "PolicyConflict"
)

// sourceStates holds what each polled source last reported, until the
// source-status worker writes it to the source's PolicySource.
type sourceStates struct {
	checks map[string]sources.Status // by source name; guarded by Controller.mu
	// live is the last PolicySource read or written per source; only the
	// one source-status worker touches it.
	live map[string]*sproutv1alpha1.PolicySource
}

// sourceChecked keeps a polled source's last check for its status and counts it.
func (c *Controller) sourceChecked(source string, st sources.Status) {
	c.metrics.SourceChecks.WithLabelValues(source, string(st.Check)).Inc()
	c.metrics.SourceLastCheck.WithLabelValues(source).Set(float64(st.Fetched.Unix()))
	c.mu.Lock()
	prev, seen := c.sourceStates.checks[source]
	c.sourceStates.checks[source] = st
	c.mu.Unlock()
	if st.Err != nil && (!seen || prev.Err == nil || prev.Err.Error() != st.Err.Error()) {
		c.log.Error("source revision rejected; the last good revision keeps running", "source", source, "error", st.Err.Error())
	}
	if !seen || prev.Revision != st.Revision || errText(prev.Err) != errText(st.Err) {
		c.sourceQueue.Add(source)
	}
}

// sourcesChanged queues the PolicySource of every source delivering the
// policy, a little later so a revision of many policies is written once.
func (c *Controller) sourcesChanged(key policyKey) {
	for _, s := range c.claims.sources(key) {
		c.sourceQueue.AddAfter(s, sourceStatusDelay)
	}
}

// runSourceWorker writes PolicySource objects until the queue shuts down.
func (c *Controller) runSourceWorker(ctx context.Context) {
	for {
		name, shutdown := c.sourceQueue.Get()
		if shutdown {
			return
		}
		if err := c.syncSource(ctx, name); err != nil && ctx.Err() == nil {
			c.log.Error("source status not written", "source", name, "error", err.Error())
			c.sourceQueue.AddRateLimited(name)
		} else {
			c.sourceQueue.Forget(name)
		}
		c.sourceQueue.Done(name)
	}
}

// syncSource writes a source's PolicySource when what it should say
// differs from what it says, and emits an Event for each change a user
// would want to hear of: a revision taken, a revision or check failing, a
// new name conflict. Unchanged, it costs no request (a restart writes
// nothing).
func (c *Controller) syncSource(ctx context.Context, name string) error {
	src := c.source(name)
	if src == nil {
		return nil
	}
	live, err := c.liveSource(ctx, name)
	if err != nil {
		return err
	}
	next := &sproutv1alpha1.PolicySource{
		TypeMeta: metav1.TypeMeta{APIVersion: sproutv1alpha1.GroupVersion.String(), Kind: sproutv1alpha1.PolicySourceKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:   c.sourceObjectName(name),
			Labels: map[string]string{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy},
		},
		Spec:   src.Spec(),
		Status: *live.Status.DeepCopy(),
	}
	c.mu.RLock()
	st, checked := c.sourceStates.checks[name]
	c.mu.RUnlock()
	next.Status.Policies, next.Status.Conflicts = c.claims.ofSource(name)
	next.Status.Revision = st.Revision
	meta.SetStatusCondition(&next.Status.Conditions, sourceReady(name, st, checked, next.Status.Policies))
	c.sourceMetrics(name, live, next)
	if equality.Semantic.DeepEqual(live.Spec, next.Spec) && equality.Semantic.DeepEqual(live.Status, next.Status) && live.Labels[sproutv1alpha1.LabelManagedBy] == sproutv1alpha1.ManagedBy {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	if err != nil {
		return err
	}
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	applied, err := c.dynamic.Resource(sproutv1alpha1.PolicySources).Apply(ctx, next.Name, &unstructured.Unstructured{Object: u},
		metav1.ApplyOptions{FieldManager: sproutv1alpha1.FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("PolicySource/%s: apply: %w", next.Name, err)
	}
	written := &sproutv1alpha1.PolicySource{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, written); err != nil {
		return err
	}
	c.sourceStates.live[name] = written
	c.sourceEvents(live, written)
	return nil
}

// sourceReady is the Ready condition of a source.
func sourceReady(name string, st sources.Status, checked bool, policies int) metav1.Condition {
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue}
	var rejected *sources.RejectedError
	switch {
	case name == sources.ClusterSourceName:
		cond.Reason, cond.Message = ReasonWatching, "watching the policies stored in the cluster"
	case !checked:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, ReasonChecking, "not checked yet"
	case errors.As(st.Err, &rejected):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonRevisionRejected, st.Err.Error()
	case st.Err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonCheckFailed, st.Err.Error()
	default:
		cond.Reason, cond.Message = ReasonRevisionTaken, fmt.Sprintf("%s: %d policies", st.Revision, policies)
	}
	return cond
}

// liveSource returns the source's PolicySource as last read or written,
// reading it once from the API server (an empty one when it does not exist).
func (c *Controller) liveSource(ctx context.Context, name string) (*sproutv1alpha1.PolicySource, error) {
	if live := c.sourceStates.live[name]; live != nil {
		return live, nil
	}
	live := &sproutv1alpha1.PolicySource{}
	u, err := c.dynamic.Resource(sproutv1alpha1.PolicySources).Get(ctx, c.sourceObjectName(name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("PolicySource/%s: read: %w", c.sourceObjectName(name), err)
	default:
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, live); err != nil {
			return nil, err
		}
	}
	c.sourceStates.live[name] = live
	return live, nil
}

// sourceEvents emits an Event on the PolicySource for each change from
// before to after.
func (c *Controller) sourceEvents(before, after *sproutv1alpha1.PolicySource) {
	ref := &corev1.ObjectReference{
		APIVersion: sproutv1alpha1.GroupVersion.String(), Kind: sproutv1alpha1.PolicySourceKind,
		Name: after.Name, UID: after.UID, ResourceVersion: after.ResourceVersion,
	}
	was, is := meta.FindStatusCondition(before.Status.Conditions, ConditionReady), meta.FindStatusCondition(after.Status.Conditions, ConditionReady)
	if is != nil && is.Status == metav1.ConditionFalse && (was == nil || was.Message != is.Message) {
		c.events.Event(ref, corev1.EventTypeWarning, is.Reason, is.Message)
	}
	if after.Status.Revision != "" && after.Status.Revision != before.Status.Revision {
		c.events.Eventf(ref, corev1.EventTypeNormal, ReasonRevisionTaken, "revision %s: %d policies", after.Status.Revision, after.Status.Policies)
	}
	for _, conflict := range after.Status.Conflicts {
		if !slices.Contains(before.Status.Conflicts, conflict) {
			c.events.Event(ref, corev1.EventTypeWarning, ReasonPolicyConflict, conflict)
		}
	}
}

// sourceMetrics sets the gauges of a source from its status.
func (c *Controller) sourceMetrics(name string, before, after *sproutv1alpha1.PolicySource) {
	ready := 0.0
	if cond := meta.FindStatusCondition(after.Status.Conditions, ConditionReady); cond != nil && cond.Status == metav1.ConditionTrue {
		ready = 1
	}
	c.metrics.SourceReady.WithLabelValues(name).Set(ready)
	c.metrics.SourcePolicies.WithLabelValues(name).Set(float64(after.Status.Policies))
	if before.Status.Revision != after.Status.Revision {
		c.metrics.SourceRevision.DeleteLabelValues(name, before.Status.Revision)
	}
	if after.Status.Revision != "" {
		c.metrics.SourceRevision.WithLabelValues(name, after.Status.Revision).Set(1)
	}
}

// sourceObjectName names the PolicySource of a source: a shard's own, so
// that shards selecting from one source do not write over each other.
func (c *Controller) sourceObjectName(source string) string {
	if c.opts.Shard == "" {
		return sources.ObjectName(source)
	}
	return sources.ObjectName(source) + "-" + c.opts.Shard
}

// source returns the configured source of that name.
func (c *Controller) source(name string) sources.Source {
	for _, s := range c.opts.Sources {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sourceStatusDelay coalesces the status writes of a source delivering many
// policies at once.
const sourceStatusDelay = 200 * time.Millisecond
