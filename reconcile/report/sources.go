package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

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

// Sources writes each policy source's PolicySource: its revision, the
// policies it delivers, the names it shares with other sources, and its
// Ready condition, with an Event for each change a user would want to hear
// of and the source's series. One worker writes, from a queue of source
// names that coalesces a burst of changes.
type Sources struct {
	client  dynamic.Interface
	sources []sources.Source
	// shard names this replica's PolicySources apart from other shards'.
	shard string
	// census counts the policies a source delivers and describes the names
	// it shares with another source.
	census  func(source string) (policies int, conflicts []string)
	events  record.EventRecorder
	metrics *Metrics
	log     *slog.Logger
	queue   workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	checks map[string]sources.Status // by source name
	// live is the last PolicySource read or written per source; only the
	// one worker touches it.
	live map[string]*sproutv1alpha1.PolicySource
}

// SourcesOptions configure Sources.
type SourcesOptions struct {
	Client  dynamic.Interface
	Sources []sources.Source
	Shard   string
	Census  func(source string) (policies int, conflicts []string)
	Events  record.EventRecorder
	Metrics *Metrics
	Log     *slog.Logger
}

// NewSources writes the PolicySources of o.Sources.
func NewSources(o SourcesOptions) *Sources {
	return &Sources{client: o.Client, sources: o.Sources, shard: o.Shard, census: o.Census, events: o.Events, metrics: o.Metrics, log: o.Log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sources", MetricsProvider: o.Metrics.Queue}),
		checks: map[string]sources.Status{}, live: map[string]*sproutv1alpha1.PolicySource{}}
}

// Queue asks for a source's PolicySource to be written if it is stale.
func (c *Sources) Queue(source string) { c.queue.Add(source) }

// ShutDown stops the worker once it is idle.
func (c *Sources) ShutDown() { c.queue.ShutDown() }

// LastCheck returns what the source last reported of its check.
func (c *Sources) LastCheck(source string) sources.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checks[source]
}

// Checked keeps a polled source's last check for its status and counts it.
func (c *Sources) Checked(source string, st sources.Status) {
	c.metrics.SourceChecks.WithLabelValues(source, string(st.Check)).Inc()
	c.metrics.SourceLastCheck.WithLabelValues(source).Set(float64(st.Fetched.Unix()))
	c.mu.Lock()
	prev, seen := c.checks[source]
	c.checks[source] = st
	c.mu.Unlock()
	if st.Err != nil && (!seen || prev.Err == nil || prev.Err.Error() != st.Err.Error()) {
		c.log.Error("source revision rejected; the last good revision keeps running", "source", source, "error", st.Err.Error())
	}
	if !seen || prev.Revision != st.Revision || errText(prev.Err) != errText(st.Err) {
		c.queue.Add(source)
	}
}

// Changed queues the PolicySources of sources whose policies changed, a
// little later so a revision of many policies is written once.
func (c *Sources) Changed(sources ...string) {
	for _, s := range sources {
		c.queue.AddAfter(s, sourceStatusDelay)
	}
}

// Run writes PolicySource objects until the queue shuts down.
func (c *Sources) Run(ctx context.Context) {
	for {
		name, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		if err := c.syncSource(ctx, name); err != nil && ctx.Err() == nil {
			c.log.Error("source status not written", "source", name, "error", err.Error())
			c.queue.AddRateLimited(name)
		} else {
			c.queue.Forget(name)
		}
		c.queue.Done(name)
	}
}

// syncSource writes a source's PolicySource when what it should say
// differs from what it says, and emits an Event for each change a user
// would want to hear of: a revision taken, a revision or check failing, a
// new name conflict. Unchanged, it costs no request (a restart writes
// nothing).
func (c *Sources) syncSource(ctx context.Context, name string) error {
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
	c.mu.Lock()
	st, checked := c.checks[name]
	c.mu.Unlock()
	next.Status.Policies, next.Status.Conflicts = c.census(name)
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
	applied, err := c.client.Resource(sproutv1alpha1.PolicySources).Apply(ctx, next.Name, &unstructured.Unstructured{Object: u},
		metav1.ApplyOptions{FieldManager: sproutv1alpha1.FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("PolicySource/%s: apply: %w", next.Name, err)
	}
	written := &sproutv1alpha1.PolicySource{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, written); err != nil {
		return err
	}
	c.live[name] = written
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
func (c *Sources) liveSource(ctx context.Context, name string) (*sproutv1alpha1.PolicySource, error) {
	if live := c.live[name]; live != nil {
		return live, nil
	}
	live := &sproutv1alpha1.PolicySource{}
	u, err := c.client.Resource(sproutv1alpha1.PolicySources).Get(ctx, c.sourceObjectName(name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("PolicySource/%s: read: %w", c.sourceObjectName(name), err)
	default:
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, live); err != nil {
			return nil, err
		}
	}
	c.live[name] = live
	return live, nil
}

// sourceEvents emits an Event on the PolicySource for each change from
// before to after.
func (c *Sources) sourceEvents(before, after *sproutv1alpha1.PolicySource) {
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
func (c *Sources) sourceMetrics(name string, before, after *sproutv1alpha1.PolicySource) {
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
func (c *Sources) sourceObjectName(source string) string {
	if c.shard == "" {
		return sources.ObjectName(source)
	}
	return sources.ObjectName(source) + "-" + c.shard
}

// source returns the configured source of that name.
func (c *Sources) source(name string) sources.Source {
	for _, s := range c.sources {
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
