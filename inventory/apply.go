package inventory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the field manager of every write Sprout makes.
const FieldManager = "sprout"

// reasonPresent marks objects a non-synchronizing policy leaves as they are.
const reasonPresent = "exists; the policy does not synchronize"

// Applier writes desired objects with server-side apply.
type Applier struct {
	client  client.Client
	manager *ssa.ResourceManager
}

// NewApplier returns an Applier writing through cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("inventory: client: %w", err)
	}
	return &Applier{client: c, manager: ssa.NewResourceManager(c, nil, ssa.Owner{Field: FieldManager, Group: "sprout.dev"})}, nil
}

// ApplyOptions say how desired objects are written.
type ApplyOptions struct {
	// Synchronize keeps existing objects equal to the desired ones, taking
	// ownership of the fields Sprout sets: edits by others to them are
	// reverted. Without it, objects are created when absent and never
	// touched again.
	Synchronize bool
	// Alive reports whether a trigger (by UID) still exists. An object of
	// the same policy whose trigger is gone — a trigger deleted and created
	// again under its name — is taken over instead of reported as not
	// owned. Nil treats every trigger as alive.
	Alive func(triggerUID string) bool
}

// Live looks up Sprout's own objects as they are in the cluster, from a
// cache: the label-selected informers of the controller.
type Live interface {
	// Get returns the cached object with obj's kind, namespace and name.
	Get(obj *unstructured.Unstructured) (*unstructured.Unstructured, bool)
}

// Apply writes the desired objects and returns one change per object.
// Each object must carry its origin labels (Label). An object that exists
// without the same origin (someone else's, or another policy's or
// trigger's) is never written: it is skipped and named by NotOwned. An
// object whose cached state already holds every desired field is not sent
// at all, so a sync that changes nothing makes no request.
func (a *Applier) Apply(ctx context.Context, objects []*unstructured.Unstructured, live Live, opts ApplyOptions) (ChangeSet, error) {
	return a.each(ctx, objects, live, opts, a.write)
}

// each decides, for every object, whether it needs a write, and hands the
// ones that do to write. An object's own error fails it alone; once an
// error says that the API server cannot serve at all, the objects not yet
// started fail with it, so that a sync during an outage costs a request per
// object under way, not one per object. When ctx ends, the objects under
// way are finished and no other is started.
func (a *Applier) each(ctx context.Context, objects []*unstructured.Unstructured, live Live, opts ApplyOptions,
	write func(context.Context, *unstructured.Unstructured) (Change, error)) (ChangeSet, error) {
	changes := make([]Change, len(objects))
	errs := make([]error, len(objects))
	var down atomic.Pointer[error]
	var wg sync.WaitGroup
	slots := make(chan struct{}, applyParallelism)
	for i, obj := range objects {
		slots <- struct{}{}
		if err := ctx.Err(); err != nil && down.Load() == nil {
			errs[i] = err
			down.Store(&err)
		}
		if err := down.Load(); err != nil {
			<-slots
			changes[i] = changeOf(obj, Failed, "not tried: "+(*err).Error())
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			changes[i], errs[i] = a.one(ctx, obj, live, opts, write)
			if err := errs[i]; err != nil && unavailable(err) {
				down.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	return ChangeSet{Changes: changes}, errors.Join(errs...)
}

// unavailable reports whether err says that the API server cannot serve
// any request now (unreachable, shutting down, overloaded) or that the
// context ended, rather than anything about one object.
func unavailable(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch status.Status().Code {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &netErr) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// applyParallelism bounds the requests one apply has in flight: for a
// policy with many objects the API server, not a queue of sequential
// round trips in Sprout, should set the pace.
const applyParallelism = 16

// finishGrace is how long the requests for an object under way may outlive
// the context of the sync.
const finishGrace = 10 * time.Second

// one decides for one object and writes it if it must. Its requests
// outlive ctx by up to finishGrace: a write under way at SIGTERM completes
// before the controller returns and its Lease is released, so it never
// lands beside the next leader's writes.
func (a *Applier) one(ctx context.Context, obj *unstructured.Unstructured, live Live, opts ApplyOptions,
	write func(context.Context, *unstructured.Unstructured) (Change, error)) (Change, error) {
	sync := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(sync))
	defer cancel()
	stop := context.AfterFunc(sync, func() { time.AfterFunc(finishGrace, cancel) })
	defer stop()
	stampApplied(obj)
	action, reason, owner, err := a.decide(ctx, obj, live, opts)
	if err != nil {
		return changeOf(obj, Failed, err.Error()), fmt.Errorf("%s: %w", ObjectID(obj), err)
	}
	if action != "" {
		ch := changeOf(obj, action, reason)
		ch.Owner = owner
		return ch, nil
	}
	ch, err := write(ctx, obj)
	if err != nil {
		return changeOf(obj, Failed, err.Error()), err
	}
	return ch, nil
}

// write applies one object with server-side apply.
func (a *Applier) write(ctx context.Context, obj *unstructured.Unstructured) (Change, error) {
	// ssa's Force deletes and recreates an object whose immutable fields
	// changed; Sprout never does (DESIGN §4: no delete + recreate), it
	// reports the error. Field ownership is always forced by ssa.
	o := ssa.DefaultApplyOptions()
	o.Force = false
	entry, err := a.manager.Apply(ctx, obj, o)
	if err != nil {
		return Change{}, err
	}
	return changeOf(obj, actionOf(entry.Action), ""), nil
}

// decide returns the action for an object that needs no write, or "" when
// it must be applied; for an object another of Sprout's policies owns, also
// that policy (its sprout.dev/policy annotation).
func (a *Applier) decide(ctx context.Context, obj *unstructured.Unstructured, live Live, opts ApplyOptions) (action Action, reason, owner string, err error) {
	var labels, annotations map[string]string
	cached, inCache := live.Get(obj)
	if inCache {
		labels, annotations = cached.GetLabels(), cached.GetAnnotations()
	} else {
		// Not among Sprout's objects: absent, someone else's, or not cached yet.
		existing, err := a.metadata(ctx, obj)
		if err != nil || existing == nil {
			return "", "", "", err
		}
		labels, annotations = existing.GetLabels(), existing.GetAnnotations()
	}
	switch {
	case !sameOrigin(labels, obj.GetLabels()) && !orphanedByTrigger(labels, obj.GetLabels(), opts.Alive):
		if labels[LabelManagedBy] == ManagedBy && annotations[AnnotationPolicy] != obj.GetAnnotations()[AnnotationPolicy] {
			owner = annotations[AnnotationPolicy]
		}
		return Skipped, notOwnedReason(labels), owner, nil
	case !opts.Synchronize:
		return Skipped, reasonPresent, "", nil
	case inCache && covers(cached, obj):
		return Unchanged, "", "", nil
	}
	return "", "", "", nil
}

// metadata reads the object's metadata, or nil when it does not exist.
func (a *Applier) metadata(ctx context.Context, obj *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(obj.GroupVersionKind())
	err := a.client.Get(ctx, client.ObjectKeyFromObject(obj), m)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return m, nil
}

// originLabels identify who generated an object.
var originLabels = []string{LabelManagedBy, LabelPolicyName, LabelPolicyNamespace, LabelTriggerUID}

func sameOrigin(existing, desired map[string]string) bool {
	for _, k := range originLabels {
		if existing[k] != desired[k] {
			return false
		}
	}
	return true
}

// orphanedByTrigger reports whether existing belongs to the same policy as
// desired but to a trigger that no longer exists.
func orphanedByTrigger(existing, desired map[string]string, alive func(string) bool) bool {
	if alive == nil {
		return false
	}
	for _, k := range []string{LabelManagedBy, LabelPolicyName, LabelPolicyNamespace} {
		if existing[k] != desired[k] {
			return false
		}
	}
	return !alive(existing[LabelTriggerUID])
}

func notOwnedReason(existing map[string]string) string {
	switch {
	case existing[LabelManagedBy] != ManagedBy:
		return "exists and is not managed by Sprout"
	case existing[LabelPolicyName] == "":
		return "exists without a policy label"
	default:
		policy := existing[LabelPolicyName]
		if ns := existing[LabelPolicyNamespace]; ns != "" {
			policy = ns + "/" + policy
		}
		return fmt.Sprintf("owned by policy %s for trigger %s", policy, existing[LabelTriggerUID])
	}
}

func actionOf(a ssa.Action) Action {
	switch a {
	case ssa.CreatedAction:
		return Created
	case ssa.ConfiguredAction:
		return Configured
	case ssa.UnchangedAction:
		return Unchanged
	case ssa.SkippedAction:
		return Skipped
	}
	return Failed
}
