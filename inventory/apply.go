package inventory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// reasonPresent marks objects a non-synchronizing policy leaves as they are.
const reasonPresent = "exists; the policy does not synchronize"

// Applier writes desired objects with server-side apply.
type Applier struct {
	client client.Client
	// raw sends creates whose answer is not decoded into a map: that
	// decoding was a large part of Sprout's CPU while it generated.
	raw rest.Interface
	// resources maps a kind to the path segment its creates post to, so
	// that a create does not ask the client's REST mapper, which allocates
	// on every call, each time.
	resources sync.Map // schema.GroupVersionKind → createPath
	// created are the versions creates made as desired that the watch
	// has yet to bring.
	created createdVersions
}

// createPath is where objects of one kind are created.
type createPath struct {
	prefix, resource string
	namespaced       bool
}

// NewApplier returns an Applier writing through cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("inventory: client: %w", err)
	}
	rc := rest.CopyConfig(cfg)
	rc.APIPath, rc.GroupVersion = "/", &schema.GroupVersion{}
	rc.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	raw, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("inventory: REST client: %w", err)
	}
	return &Applier{client: c, raw: raw}, nil
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
	// Round, when set, is the round of a policy's Decisions this Apply is
	// part of: the objects found unchanged are remembered, so that the
	// next round passes over them without a comparison.
	Round *Round
	// Settled are desired objects given as a Round settled them, which
	// Holds still: they are reported Unchanged, after the objects, and
	// count as desired for Decisions.Stale.
	Settled []Settled
	// Claimed reports whether the policy's record claims the object
	// (ObjectID) for the trigger (by UID): the policy generated it, so it
	// is the policy's whatever labels it carries now. Labels are anyone's
	// to edit; a synchronizing policy writes a claimed object back, labels
	// and all. Nil claims nothing.
	Claimed func(triggerUID, objectID string) bool
}

// Live looks up Sprout's own objects as they are in the cluster, from a
// cache: the label-selected informers of the controller.
type Live interface {
	// Get returns the cached object of that kind, namespace and name.
	Get(gvk schema.GroupVersionKind, namespace, name string) (*Cached, bool)
	// Seen reports whether the cache of objects of kind gvk has seen
	// version resourceVersion, or a later one: then an object created at
	// that version and not cached has been deleted since.
	Seen(gvk schema.GroupVersionKind, resourceVersion string) bool
}

// cachedOf returns the cached copy of desired object obj.
func cachedOf(live Live, obj *unstructured.Unstructured) (*Cached, bool) {
	m := metadataStrings(obj, "")
	return live.Get(KindOf(obj), m.get("namespace"), m.get("name"))
}

// Apply writes the desired objects and returns one change per object.
// Each object must carry its origin labels (Label). An object that exists
// without the same origin (someone else's, or another policy's or
// trigger's) is never written: it is skipped and named by NotOwned. An
// object whose cached state already holds every desired field is not sent
// at all, so a sync that changes nothing makes no request.
//
// An object not in the cache is created with a plain create: one request,
// where server-side apply costs a read, a dry run and the apply. The create
// leaves Sprout's fields under an Update entry of its field manager; the
// first apply of another desired state hands them to its Apply entry
// (handOff, mayDrop), so that a field later removed from the policy is
// removed from the object.
func (a *Applier) Apply(ctx context.Context, objects []*unstructured.Unstructured, live Live, opts ApplyOptions) (ChangeSet, error) {
	return a.each(ctx, objects, live, opts, writes{create: a.create, apply: a.apply})
}

// writes are the ways each may write an object.
type writes struct {
	// create writes an object of which nothing is cached; nil reads it
	// first instead. Its AlreadyExists error sends the object on to decideRead.
	create func(ctx context.Context, obj *unstructured.Unstructured) (Change, error)
	// apply writes an object that was found to need a write. handOff
	// says that the object's fields are still held by the Update entry a
	// create left.
	apply func(ctx context.Context, obj *unstructured.Unstructured, handOff bool) (Change, error)
	// dry says that nothing is written: Decisions remember no write.
	dry bool
}

// each decides, for every object, whether it needs a write, and hands the
// ones that do to write. An object's own error fails it alone; once an
// error says that the API server cannot serve at all, the objects not yet
// started fail with it, and so do those of the round's later Apply calls,
// so that a sync during an outage costs a request per object under way,
// not one per object. When ctx ends, the objects under way are finished and
// no other is started.
func (a *Applier) each(ctx context.Context, objects []*unstructured.Unstructured, live Live, opts ApplyOptions, w writes) (ChangeSet, error) {
	changes := make([]Change, len(objects), len(objects)+settledLen(opts.Settled))
	for _, s := range opts.Settled {
		for _, o := range s.objects {
			changes = append(changes, o.change())
		}
	}
	errs := make([]error, len(objects))
	var notTried atomic.Bool
	down := new(atomic.Pointer[error])
	var requests *workers
	if opts.Round != nil {
		down, requests = &opts.Round.down, opts.Round.requests
	} else {
		requests = newWorkers(applyParallelism)
		defer requests.stop()
	}
	var wg sync.WaitGroup
	var memo *Decisions
	if opts.Round != nil {
		memo = opts.Round.d
		defer opts.Round.add(objects, opts.Settled)
	}
	for i, obj := range objects {
		// What the cache shows needs no request is decided here, without
		// a goroutine: on a sync that changes nothing, that is every object.
		cached, inCache := cachedOf(live, obj)
		if inCache && memo != nil {
			if ch, ok := memo.get(obj, cached); ok {
				changes[i] = ch
				continue
			}
		}
		if !inCache && memo != nil {
			if ch, ok := memo.created(obj, live); ok {
				changes[i] = ch
				continue
			}
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "annotations", sproutv1alpha1.AnnotationApplied); !ok {
			Stamp(obj)
		}
		var d decision
		if inCache {
			if d = decideCached(obj, cached, opts); d.action != "" {
				changes[i] = d.change(obj)
				if d.action == Unchanged && memo != nil {
					memo.put(obj, cached, changes[i])
				}
				continue
			}
		}
		wg.Add(1)
		requests.do(func() {
			defer wg.Done()
			if err := ctx.Err(); err != nil && down.CompareAndSwap(nil, &err) {
				errs[i] = err
			}
			if err := down.Load(); err != nil {
				changes[i] = changeOf(obj, Failed, "not tried: "+(*err).Error())
				notTried.Store(true)
				return
			}
			changes[i], errs[i] = a.one(ctx, obj, inCache, d, opts, w)
			if err := errs[i]; err != nil && unavailable(err) {
				down.CompareAndSwap(nil, &err)
			}
			if errs[i] == nil && !w.dry && changes[i].ResourceVersion != "" {
				if changes[i].Action == Created {
					a.created.add(obj, changes[i].ResourceVersion)
				}
				switch {
				case memo == nil:
				case changes[i].Action == Configured && inCache:
					memo.wrote(obj, cached, changes[i].ResourceVersion)
				case changes[i].Action == Created:
					memo.wrote(obj, nil, changes[i].ResourceVersion)
				}
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil && notTried.Load() {
		err = *down.Load() // found by an earlier Apply of the round
	}
	return ChangeSet{Changes: changes}, err
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

// applyParallelism bounds the requests one apply, or one round's applies
// together, have in flight: for a policy with many objects the API server,
// not a queue of sequential round trips in Sprout, should set the pace.
const applyParallelism = 16

// finishGrace is how long the requests for an object under way may outlive
// the context of the sync.
const finishGrace = 10 * time.Second

// one writes one object, or first decides whether it must when the cache
// does not hold it (inCache false) or gave no decision (d.read); d is the
// decision the cache gave.
// Its requests outlive ctx by up to finishGrace: a write under way at
// SIGTERM completes before the controller returns and its Lease is
// released, so it never lands beside the next leader's writes.
func (a *Applier) one(ctx context.Context, obj *unstructured.Unstructured, inCache bool, d decision, opts ApplyOptions, w writes) (Change, error) {
	sync := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(sync))
	defer cancel()
	stop := context.AfterFunc(sync, func() { time.AfterFunc(finishGrace, cancel) })
	defer stop()
	if !inCache || d.read {
		if w.create != nil && !d.read {
			// Not among Sprout's cached objects: most often absent.
			ch, err := w.create(ctx, obj)
			if err == nil {
				return ch, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return changeOf(obj, Failed, err.Error()), fmt.Errorf("%s: %w", ObjectID(obj), err)
			}
			// Someone else's, or Sprout's and not cached yet: read it.
		}
		var err error
		if d, err = a.decideRead(ctx, obj, opts); err != nil {
			return changeOf(obj, Failed, err.Error()), fmt.Errorf("%s: %w", ObjectID(obj), err)
		}
		if d.action != "" {
			return d.change(obj), nil
		}
	}
	ch, err := w.apply(ctx, obj, d.handOff)
	if err != nil {
		return changeOf(obj, Failed, err.Error()), err
	}
	return ch, nil
}

// create creates obj, failing with AlreadyExists when something by its name
// exists, whoever it belongs to.
//
// The object is encoded as it is (desired objects are never modified, so
// no copy), as protobuf when it can be (createBody). The answer comes in
// the body's format, which createdAsDesired reads: encoding it as JSON
// costs the API server more than the protobuf does, and reading it costs
// Sprout no more.
func (a *Applier) create(ctx context.Context, obj *unstructured.Unstructured) (Change, error) {
	p, err := a.createPath(KindOf(obj))
	if err != nil {
		return Change{}, err
	}
	body, contentType, err := createBody(obj)
	if err != nil {
		return Change{}, err
	}
	res := a.raw.Post().AbsPath(p.prefix).
		NamespaceIfScoped(obj.GetNamespace(), p.namespaced).
		Resource(p.resource).
		Param("fieldManager", sproutv1alpha1.FieldManager).
		SetHeader("Content-Type", contentType).
		SetHeader("Accept", contentType).
		Body(body).
		Do(ctx)
	if err := res.Error(); err != nil {
		return Change{}, err // Error, not Raw, reads the Status of a refusal
	}
	answer, _ := res.Raw()
	ch := changeOf(obj, Created, "")
	ch.ResourceVersion = createdAsDesired(answer, body, obj)
	return ch, nil
}

// createdAsDesired reads a create's answer, the object as the create made
// it, and returns the version made when the object holds every field of
// desired, as a sync comparing it with the cache would find it: the
// object needs nothing more, and its evaluation may settle at once. It
// returns "" when a field differs (an admission webhook changed it) or the
// answer does not decode: the object is then compared once the cache holds
// it. The answer is JSON, or protobuf for a built-in type, which is read
// as the JSON the API server would have sent: its typed object converted
// to unstructured, less the managed fields that desired never holds; but
// first, when the create sent protobuf too, compared with what was sent.
func createdAsDesired(answer, sent []byte, desired *unstructured.Unstructured) string {
	var made *unstructured.Unstructured
	if bytes.HasPrefix(answer, protobufPrefix) {
		if bytes.HasPrefix(sent, protobufPrefix) {
			if version, ok := madeAsSent(answer, sent, desired.GroupVersionKind()); ok {
				return version
			}
		}
		made = fromProtobuf(answer, desired.GroupVersionKind())
	} else {
		var m map[string]any
		if sigsjson.UnmarshalCaseSensitivePreserveInts(answer, &m) == nil && m != nil {
			made = &unstructured.Unstructured{Object: m}
		}
	}
	if made == nil || !covers(made, desired) {
		return ""
	}
	return made.GetResourceVersion()
}

// createPath maps gvk to where its objects are created, once per kind. A
// kind not served is not remembered: it may be served later.
func (a *Applier) createPath(gvk schema.GroupVersionKind) (createPath, error) {
	if p, ok := a.resources.Load(gvk); ok {
		return p.(createPath), nil
	}
	m, err := a.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return createPath{}, err
	}
	p := createPath{prefix: "/apis/" + gvk.Group + "/" + gvk.Version, resource: m.Resource.Resource,
		namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
	if gvk.Group == "" {
		p.prefix = "/api/" + gvk.Version
	}
	a.resources.Store(gvk, p)
	return p, nil
}

// apply writes obj with server-side apply, which was found to differ from
// what is cached: one request, without a read and a dry run first. An object
// whose fields a create still holds has them handed over first.
func (a *Applier) apply(ctx context.Context, obj *unstructured.Unstructured, handOff bool) (Change, error) {
	if handOff {
		if err := a.handOver(ctx, obj); err != nil {
			return Change{}, fmt.Errorf("%s: hand over the fields of its create: %w", ObjectID(obj), err)
		}
	}
	applied, err := a.serverApply(ctx, obj)
	if err != nil {
		return Change{}, fmt.Errorf("%s apply failed: %w", ObjectID(obj), err)
	}
	ch := changeOf(obj, Configured, "")
	ch.ResourceVersion = applied.GetResourceVersion()
	return ch, nil
}

// serverApply sends obj as a server-side apply of Sprout's field manager
// (a dry run with client.DryRunAll among opts) and returns the object the
// API server made. Field ownership is forced, as Flux's applies are; an
// immutable field changed fails the apply, and Sprout never deletes to
// recreate: that would change the object's UID, leave a moment without
// it and could hang on a finalizer.
func (a *Applier) serverApply(ctx context.Context, obj *unstructured.Unstructured, opts ...client.ApplyOption) (*unstructured.Unstructured, error) {
	applied := obj.DeepCopy()
	opts = append(opts, client.ForceOwnership, client.FieldOwner(sproutv1alpha1.FieldManager))
	return applied, a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), opts...)
}

// handOver moves the fields the Update entry of a create of Sprout's holds
// to Sprout's Apply entry with client-go's csaupgrade, as kubectl does for
// objects a client-side apply wrote: it reads the object's managed fields
// and rewrites them with a JSON patch that also sets the resourceVersion it
// read, so that a change made in between fails it with a conflict rather
// than being overwritten with stale managed fields. An object gone
// meanwhile needs nothing: the apply creates it. csaupgrade merges the
// Update entry into an Apply entry of the same apiVersion only; both are
// Sprout's writes of one desired kind and version, so they agree.
func (a *Applier) handOver(ctx context.Context, obj *unstructured.Unstructured) error {
	m, err := a.metadata(ctx, obj)
	if err != nil || m == nil {
		return err
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(m, sets.New(sproutv1alpha1.FieldManager), sproutv1alpha1.FieldManager)
	if err != nil || patch == nil {
		return err
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(obj.GroupVersionKind())
	target.SetNamespace(obj.GetNamespace())
	target.SetName(obj.GetName())
	return a.client.Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(sproutv1alpha1.FieldManager))
}

// decision is what was found for one object: an action when it needs no
// write; for an object another of Sprout's policies owns, that policy (its
// sprout.dev/policy annotation); for one to write, whether its fields must
// be handed over from the create's entry first; whether the object must be
// read to decide (its cached copy is released).
type decision struct {
	action  Action
	reason  string
	owner   string
	handOff bool
	read    bool
	// reclaim: the object is claimed by the policy's record but its labels
	// say otherwise; it is written whatever else it holds.
	reclaim bool
}

// decideRead tells whether an object the cache does not hold must be
// written, from its metadata read from the API server: it is absent,
// someone else's, or Sprout's and not cached yet.
func (a *Applier) decideRead(ctx context.Context, obj *unstructured.Unstructured, opts ApplyOptions) (decision, error) {
	existing, err := a.metadata(ctx, obj)
	if err != nil || existing == nil {
		return decision{}, err
	}
	annotations := stringsOf(existing.GetAnnotations())
	written := slices.ContainsFunc(existing.GetManagedFields(), isSproutEntry)
	d := decideOwner(obj, stringsOf(existing.GetLabels()), annotations, written, opts)
	if d.action != "" {
		return d, nil
	}
	if !d.reclaim && annotations.get(sproutv1alpha1.AnnotationApplied) == metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationApplied) {
		// Written from this very desired state and not cached yet (most
		// often, created by the sync before, a moment ago): the cache will
		// hold it, and any change made to it is an event that queues its
		// policy again, to be compared then.
		return decision{action: Unchanged}, nil
	}
	return decision{handOff: slices.ContainsFunc(existing.GetManagedFields(), isCreateEntry) &&
		mayDrop(annotations.get(sproutv1alpha1.AnnotationApplied), obj)}, nil
}

// decideCached decides from the cached state of obj.
func decideCached(obj *unstructured.Unstructured, cached *Cached, opts ApplyOptions) decision {
	if holds, ok := cached.released(); ok {
		return decideReleased(obj, holds, opts)
	}
	live := cached.Object()
	if d := decideOwner(obj, metadataStrings(live, "labels"), metadataStrings(live, "annotations"), cached.written, opts); d.action != "" {
		return d
	}
	if covers(live, obj) {
		return decision{action: Unchanged}
	}
	return decision{handOff: cached.createHeld && mayDrop(metadataStrings(live, "annotations").get(sproutv1alpha1.AnnotationApplied), obj)}
}

// decideReleased decides for obj from a cached copy that holds entire the
// desired state stamped holds, of which nothing else is kept: obj, with
// that stamp, is that state, found as it was (and, for a policy that does
// not synchronize, left as it is). Any other state is decided from a read,
// as an object not cached is: what is needed to compare it was released.
func decideReleased(obj *unstructured.Unstructured, holds string, opts ApplyOptions) decision {
	annotations := metadataStrings(obj, "annotations")
	if annotations.get(sproutv1alpha1.AnnotationApplied) != holds {
		return decision{read: true}
	}
	if d := decideOwner(obj, metadataStrings(obj, "labels"), annotations, true, opts); d.action != "" {
		return d
	}
	return decision{action: Unchanged}
}

// mayDrop reports whether applying obj over an object last written with
// stamp applied (its sproutv1alpha1.AnnotationApplied) may remove a field, so that the
// fields a create of Sprout's still holds must be handed over first: a
// field the create's Update entry keeps would otherwise stay. Only another
// desired state can drop a field. The same one (the object changed by
// another writer, to be put back) cannot, so it is applied in one request;
// the create's entry stays until the desired state changes. A create's
// entry holds the fields of the state created, and an apply of any other
// state hands it over first, so a stamp equal to obj's means that the
// entry holds no field obj lacks.
func mayDrop(applied string, obj *unstructured.Unstructured) bool {
	return applied != metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationApplied)
}

// decideOwner returns the decision for an object that exists with labels
// and annotations when it must not be written: another owner's, or, for a
// policy that does not synchronize, any that exists. written says that its
// managed fields hold an entry of Sprout's (isSproutEntry).
//
// The labels are not the last word: anyone who may edit an object may
// remove a label, and would otherwise turn synchronization off for it. An
// object the policy's record claims (ApplyOptions.Claimed) is the policy's
// whatever its labels say; so, for a synchronizing policy, is one Sprout
// wrote that names no other origin (adoptable): its labels were removed
// where nobody saw them go, while Sprout was stopped.
func decideOwner(obj *unstructured.Unstructured, labels, annotations stringMap, written bool, opts ApplyOptions) decision {
	desired := metadataStrings(obj, "labels")
	own := sameOrigin(labels, desired) || orphanedByTrigger(labels, desired, opts.Alive)
	reclaim := !own && (opts.Claimed != nil && opts.Claimed(desired.get(sproutv1alpha1.LabelTriggerUID), ObjectID(obj)) ||
		opts.Synchronize && written && adoptable(obj, labels, annotations, opts.Alive))
	switch {
	case !own && !reclaim:
		d := decision{action: Skipped, reason: notOwnedReason(labels)}
		if labels.get(sproutv1alpha1.LabelManagedBy) == sproutv1alpha1.ManagedBy && annotations.get(sproutv1alpha1.AnnotationPolicy) != metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationPolicy) {
			d.owner = annotations.get(sproutv1alpha1.AnnotationPolicy)
		}
		return d
	case !opts.Synchronize:
		return decision{action: Skipped, reason: reasonPresent}
	}
	return decision{reclaim: reclaim}
}

// change is the change of an object decided without a write.
func (d decision) change(obj *unstructured.Unstructured) Change {
	ch := changeOf(obj, d.action, d.reason)
	ch.Owner = d.owner
	return ch
}

// heldByCreate reports whether obj's managed fields hold the Update entry
// a create by Sprout leaves. It reads them as they are in the object, as a
// watch decoded it: the typed entries cost a conversion of each.
func heldByCreate(obj *unstructured.Unstructured) bool { return hasEntry(obj, isCreateEntry) }

// hasEntry reports whether one of obj's managed-fields entries, of which
// only the manager, operation and subresource are read, is as is wants.
func hasEntry(obj *unstructured.Unstructured, is func(metav1.ManagedFieldsEntry) bool) bool {
	entries, _ := metadataStrings(obj, "")["managedFields"].([]any)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if m == nil {
			continue
		}
		manager, _ := m["manager"].(string)
		operation, _ := m["operation"].(string)
		sub, _ := m["subresource"].(string)
		if is(metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(operation), Subresource: sub}) {
			return true
		}
	}
	return false
}

// isCreateEntry reports whether e is the Update entry a create by Sprout
// leaves.
func isCreateEntry(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == sproutv1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == ""
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
var originLabels = []string{sproutv1alpha1.LabelManagedBy, sproutv1alpha1.LabelPolicyName, sproutv1alpha1.LabelPolicyNamespace, sproutv1alpha1.LabelTriggerUID}

// stringMap is an object's labels or annotations as they are in it, read
// without a copy.
type stringMap map[string]any

func (m stringMap) get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m stringMap) has(key string) bool {
	_, ok := m[key]
	return ok
}

func hasKey(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok
}

// metadataStrings returns obj's metadata.<field> (labels, annotations), or
// with field "" its metadata.
func metadataStrings(obj *unstructured.Unstructured, field string) stringMap {
	m, _ := obj.Object["metadata"].(map[string]any)
	if field == "" {
		return m
	}
	sm, _ := m[field].(map[string]any)
	return sm
}

func stringsOf(m map[string]string) stringMap {
	out := make(stringMap, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sameOrigin(existing, desired stringMap) bool {
	for _, k := range originLabels {
		if existing.get(k) != desired.get(k) {
			return false
		}
	}
	return true
}

// orphanedByTrigger reports whether existing belongs to the same policy as
// desired but to a trigger that no longer exists.
func orphanedByTrigger(existing, desired stringMap, alive func(string) bool) bool {
	if alive == nil {
		return false
	}
	for _, k := range []string{sproutv1alpha1.LabelManagedBy, sproutv1alpha1.LabelPolicyName, sproutv1alpha1.LabelPolicyNamespace} {
		if existing.get(k) != desired.get(k) {
			return false
		}
	}
	return !alive(existing.get(sproutv1alpha1.LabelTriggerUID))
}

func notOwnedReason(existing stringMap) string {
	switch {
	case existing.get(sproutv1alpha1.LabelManagedBy) != sproutv1alpha1.ManagedBy:
		return "exists and is not managed by Sprout"
	case existing.get(sproutv1alpha1.LabelPolicyName) == "":
		return "exists without a policy label"
	default:
		policy := existing.get(sproutv1alpha1.LabelPolicyName)
		if ns := existing.get(sproutv1alpha1.LabelPolicyNamespace); ns != "" {
			policy = ns + "/" + policy
		}
		return fmt.Sprintf("owned by policy %s for trigger %s", policy, existing.get(sproutv1alpha1.LabelTriggerUID))
	}
}
