package inventory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/internal/gopool"
	"github.com/sprout-gitops/sprout/internal/wire"
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
	// creates is told of the versions creates made as desired.
	creates Creates
}

// Creates is told of every version a create of an Applier's made holding
// its desired object entire, obj (stamped, AnnotationApplied): the caches
// pair it with the watch event that brings it and keep it released
// (cluster.CreatedVersions), whoever the Applier writes as.
type Creates interface {
	Created(obj *unstructured.Unstructured, resourceVersion string)
}

// createPath is where objects of one kind are created.
type createPath struct {
	prefix, resource string
	namespaced       bool
}

// NewApplier returns an Applier writing through cfg that reports its
// creates to creates (nil: to nobody) and maps kinds to resources with
// mapper (nil: a mapper of its own, which asks discovery on its first
// write of each group). A controller gives the mapper its discovery has
// already filled: a start's first create does not wait for a discovery
// of its own, nor does each Applier of an identity it writes as.
func NewApplier(cfg *rest.Config, creates Creates, mapper meta.RESTMapper) (*Applier, error) {
	c, err := client.New(cfg, client.Options{Mapper: mapper})
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
	return &Applier{client: c, raw: raw, creates: creates}, nil
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
	Get(gvk schema.GroupVersionKind, namespace, name string) (*cluster.Object, bool)
	// Seen reports whether the cache of objects of kind gvk has seen
	// version resourceVersion, or a later one: then an object created at
	// that version and not cached has been deleted since.
	Seen(gvk schema.GroupVersionKind, resourceVersion string) bool
}

// cachedOf returns the cached copy of desired object obj.
func cachedOf(live Live, obj *unstructured.Unstructured) (*cluster.Object, bool) {
	m := metadataStrings(obj, "")
	return live.Get(cluster.KindOf(obj), m.get("namespace"), m.get("name"))
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
	p := &pass{a: a, w: w, opts: opts, changes: changes, errs: make([]error, len(objects)), down: new(atomic.Pointer[error])}
	if opts.Round != nil {
		p.down, p.requests, p.memo = &opts.Round.down, opts.Round.requests, opts.Round.d
		defer opts.Round.add(objects, opts.Settled)
	} else {
		p.requests = gopool.New(applyParallelism)
		defer p.requests.Stop()
	}
	var wg sync.WaitGroup
	// The last request runs on this goroutine, which would only wait: a
	// sync that writes one object, as most syncs of one trigger's event
	// do, starts no goroutine whose stack grows to a request's depth.
	var last func()
	for i, obj := range objects {
		// What the cache shows needs no request is decided here, without
		// a goroutine: on a sync that changes nothing, that is every object.
		cached, inCache := cachedOf(live, obj)
		d, decided := p.fromCache(i, obj, cached, inCache, live)
		if decided {
			continue
		}
		if run := last; run != nil {
			wg.Add(1)
			p.requests.Do(func() { defer wg.Done(); run() })
		}
		last = func() { p.request(ctx, i, obj, cached, inCache, d) }
	}
	if last != nil {
		last()
	}
	wg.Wait()
	err := errors.Join(p.errs...)
	if err == nil && p.notTried.Load() {
		err = *p.down.Load() // found by an earlier Apply of the round
	}
	return ChangeSet{Changes: p.changes}, err
}

// pass is one each call: its options, and what it found of each object
// by index.
type pass struct {
	a       *Applier
	w       writes
	opts    ApplyOptions
	changes []Change
	errs    []error
	// memo is the round's Decisions, nil outside a round.
	memo *Decisions
	// down is the error that said the API server cannot serve; notTried,
	// whether an object failed with it untried.
	down     *atomic.Pointer[error]
	notTried atomic.Bool
	requests *gopool.Pool
}

// fromCache decides object i, obj, from what the round remembers and what
// the cache holds of it, when that needs no request; otherwise it returns
// the decision the cache gave, for request.
func (p *pass) fromCache(i int, obj *unstructured.Unstructured, cached *cluster.Object, inCache bool, live Live) (decision, bool) {
	if p.memo != nil {
		if inCache {
			if ch, ok := p.memo.get(obj, cached); ok {
				p.changes[i] = ch
				return decision{}, true
			}
		} else if ch, ok := p.memo.created(obj, live); ok {
			p.changes[i] = ch
			return decision{}, true
		}
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "annotations", sproutv1alpha1.AnnotationApplied); !ok {
		Stamp(obj)
	}
	if !inCache {
		return decision{}, false
	}
	d := decideCached(obj, cached, p.opts)
	if d.action == "" {
		return d, false
	}
	p.changes[i] = d.change(obj)
	if d.action == Unchanged && p.memo != nil {
		p.memo.put(obj, cached, p.changes[i])
	}
	return d, true
}

// request writes object i, obj, or decides it from a read (one), unless
// the API server was found unable to serve, and remembers what it wrote.
func (p *pass) request(ctx context.Context, i int, obj *unstructured.Unstructured, cached *cluster.Object, inCache bool, d decision) {
	if err := ctx.Err(); err != nil && p.down.CompareAndSwap(nil, &err) {
		p.errs[i] = err
	}
	if err := p.down.Load(); err != nil {
		p.changes[i] = changeOf(obj, Failed, "not tried: "+(*err).Error())
		p.notTried.Store(true)
		return
	}
	ch, err := p.a.one(ctx, obj, inCache, d, p.opts, p.w)
	p.changes[i], p.errs[i] = ch, err
	if err != nil && unavailable(err) {
		p.down.CompareAndSwap(nil, &err)
	}
	if err != nil || p.w.dry || ch.ResourceVersion == "" {
		return
	}
	if ch.Action == Created && p.a.creates != nil {
		p.a.creates.Created(obj, ch.ResourceVersion)
	}
	switch {
	case p.memo == nil:
	case ch.Action == Configured && inCache:
		p.memo.wrote(obj, cached, ch.ResourceVersion)
	case ch.Action == Created:
		p.memo.wrote(obj, nil, ch.ResourceVersion)
	}
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
// together, have in flight on their workers, beside the one each apply
// runs itself: for a policy with many objects the API server, not a queue
// of sequential round trips in Sprout, should set the pace.
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
	p, err := a.createPath(cluster.KindOf(obj))
	if err != nil {
		return Change{}, err
	}
	body, contentType, err := createBody(obj)
	if err != nil {
		return Change{}, err
	}
	// Stream, not Do: Do reads every answer into a new slice, which it
	// grows as it reads, and times the request for a metric Sprout does not
	// serve; the answer is only read here, so a buffer is taken from a pool
	// and given back. A refusal's Status is read into its error either way.
	answer, err := a.raw.Post().AbsPath(p.prefix).
		NamespaceIfScoped(obj.GetNamespace(), p.namespaced).
		Resource(p.resource).
		Param("fieldManager", sproutv1alpha1.FieldManager).
		SetHeader("Content-Type", contentType).
		SetHeader("Accept", contentType).
		Body(body).
		Stream(ctx)
	if err != nil {
		return Change{}, err
	}
	buf := answers.Get().(*bytes.Buffer)
	defer putAnswer(buf)
	_, err = buf.ReadFrom(answer)
	if closeErr := answer.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		// Created, but unread: as Do says, the caller tries again, and
		// finds the object there.
		return Change{}, fmt.Errorf("reading the answer to the create of %s: %w", ObjectID(obj), err)
	}
	ch := changeOf(obj, Created, "")
	ch.ResourceVersion = createdAsDesired(buf.Bytes(), body, obj) // copies what it keeps
	return ch, nil
}

// answers holds the buffers creates read their answers into.
var answers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putAnswer gives buf back to answers, unless an unusually large answer
// grew it: a pool keeps what it holds until the collector runs twice.
func putAnswer(buf *bytes.Buffer) {
	if buf.Cap() > 64<<10 {
		return
	}
	buf.Reset()
	answers.Put(buf)
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
	if bytes.HasPrefix(answer, wire.Prefix) {
		if bytes.HasPrefix(sent, wire.Prefix) {
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
