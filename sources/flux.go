package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// fluxKinds are the Flux source kinds whose artifacts hold policies, by
// kind: each one's resource, and a typed object to read it into.
var fluxKinds = map[string]struct {
	resource string
	object   func() fluxObject
}{
	sourcev1.GitRepositoryKind: {"gitrepositories", func() fluxObject { return &sourcev1.GitRepository{} }},
	sourcev1.OCIRepositoryKind: {"ocirepositories", func() fluxObject { return &sourcev1.OCIRepository{} }},
	sourcev1.BucketKind:        {"buckets", func() fluxObject { return &sourcev1.Bucket{} }},
}

// fluxObject is what Sprout reads of a Flux source object.
type fluxObject interface {
	sourcev1.Source
	GetConditions() []metav1.Condition
}

// FluxRef names a Flux source object: Kind/Namespace/Name.
type FluxRef struct {
	Kind, Namespace, Name string
}

func (r FluxRef) String() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

// GVR is the resource of the ref's kind.
func (r FluxRef) GVR() schema.GroupVersionResource {
	return sourcev1.GroupVersion.WithResource(fluxKinds[r.Kind].resource)
}

// ParseFluxRef reads "kind/namespace/name", the kind one of GitRepository,
// OCIRepository and Bucket (any case).
func ParseFluxRef(s string) (FluxRef, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return FluxRef{}, fmt.Errorf("%q: want <kind>/<namespace>/<name>, such as GitRepository/flux-system/platform", s)
	}
	for kind := range fluxKinds {
		if strings.EqualFold(kind, parts[0]) {
			return FluxRef{Kind: kind, Namespace: parts[1], Name: parts[2]}, nil
		}
	}
	return FluxRef{}, fmt.Errorf("%q: kind %q is not a Flux source Sprout reads; want GitRepository, OCIRepository or Bucket", s, parts[0])
}

// FluxOptions describe a Flux source.
type FluxOptions struct {
	// Ref names the GitRepository, OCIRepository or Bucket.
	Ref FluxRef
	// Path inside the artifact to read policies from; the root when empty.
	Path string
	// Client reads the source object.
	Client dynamic.Interface
	// Interval between checks when the object has not changed: a download
	// that failed is tried again after it.
	Interval time.Duration
	// Timeout bounds one download.
	Timeout time.Duration
}

// FluxSource runs the policies in the artifact of a Flux source. It watches
// the source object and, when its artifact moves, downloads the tarball
// from source-controller, checks its digest and reads it as a Git revision
// is read: whole or not at all. Credentials, verification and polling of the
// origin are Flux's.
type FluxSource struct {
	*poller
	opts FluxOptions
	// kick wakes the poll loop when the object changes.
	kick chan struct{}
	// digest is the digest of the artifact last taken; only the poll
	// loop touches it.
	digest string
}

var _ Source = (*FluxSource)(nil)

// NewFlux returns a source of the policies in a Flux source's artifact.
func NewFlux(opts FluxOptions) (*FluxSource, error) {
	if _, ok := fluxKinds[opts.Ref.Kind]; !ok {
		return nil, fmt.Errorf("flux source %s: kind %q is not GitRepository, OCIRepository or Bucket", opts.Ref, opts.Ref.Kind)
	}
	if opts.Client == nil {
		return nil, fmt.Errorf("flux source %s: no client", opts.Ref)
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	f := &FluxSource{opts: opts, kick: make(chan struct{}, 1)}
	f.poller = newPoller("flux:"+opts.Ref.String(), opts.Interval, f.fetch)
	return f, nil
}

// Spec describes the Flux source object and the path read.
func (f *FluxSource) Spec() sproutv1alpha1.PolicySourceSpec {
	return sproutv1alpha1.PolicySourceSpec{Name: f.name, Type: "flux", URL: f.opts.Ref.String(), Path: f.opts.Path, Interval: f.interval.String()}
}

// Start watches the source object and checks its artifact at once, at every
// change of the object and every interval.
func (f *FluxSource) Start(ctx context.Context, h Handler) error {
	ref := f.opts.Ref
	inf := dynamicinformer.NewFilteredDynamicInformer(f.opts.Client, ref.GVR(), ref.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ref.Name).String()
		}).Informer()
	wake := func() {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { wake() },
		UpdateFunc: func(any, any) { wake() },
		DeleteFunc: func(any) { wake() },
	}); err != nil {
		return fmt.Errorf("watch %s: %w", ref, err)
	}
	f.running.Go(func() { inf.RunWithContext(ctx) })
	f.running.Go(func() { f.loop(ctx, h) })
	return nil
}

// loop checks the artifact until ctx ends: at once, then when the object
// changes or the interval passes.
func (f *FluxSource) loop(ctx context.Context, h Handler) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		case <-timer.C:
		}
		f.poll(ctx, h)
		timer.Reset(f.interval)
	}
}

// errFluxWaiting: the source object is being reconciled; its next change
// wakes the loop.
var errFluxWaiting = errors.New("waiting for the source to be reconciled")

// fetch takes the object's artifact when it is ready and moved since last.
func (f *FluxSource) fetch(ctx context.Context, last string) (contents, string, bool, error) {
	artifact, err := f.artifact(ctx)
	if errors.Is(err, errFluxWaiting) {
		return contents{}, last, true, nil
	}
	if err != nil {
		return contents{}, "", false, err
	}
	if artifact.Revision == last && artifact.Digest == f.digest {
		return contents{}, last, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	got, err := fetchArtifact(ctx, artifact.URL, artifact.Digest, f.opts.Path)
	if err != nil {
		return contents{}, "", false, fmt.Errorf("%s at %s: %w", f.opts.Ref, artifact.Revision, err)
	}
	f.digest = artifact.Digest
	return got, artifact.Revision, false, nil
}

// fluxArtifact is what fetch needs of status.artifact.
type fluxArtifact struct{ Revision, Digest, URL string }

// artifact reads the source object and returns its artifact if it is ready
// to take: an error when it has none or its Ready condition is False,
// errFluxWaiting while it is being reconciled (Ready Unknown, or a spec
// not observed yet), since source-controller is about to say more.
func (f *FluxSource) artifact(ctx context.Context) (fluxArtifact, error) {
	ref := f.opts.Ref
	u, err := f.opts.Client.Resource(ref.GVR()).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fluxArtifact{}, fmt.Errorf("%s: not found", ref)
	} else if err != nil {
		return fluxArtifact{}, fmt.Errorf("%s: %w", ref, err)
	}
	obj := fluxKinds[ref.Kind].object()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fluxArtifact{}, fmt.Errorf("%s: %w", ref, err)
	}
	ready := meta.FindStatusCondition(obj.GetConditions(), "Ready")
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	a := obj.GetArtifact()
	switch {
	case ready != nil && ready.Status == metav1.ConditionFalse:
		return fluxArtifact{}, fmt.Errorf("%s is not ready (%s): %s", ref, ready.Reason, ready.Message)
	case a == nil && (ready == nil || ready.Status == metav1.ConditionTrue):
		return fluxArtifact{}, fmt.Errorf("%s has no artifact (status.artifact) yet", ref)
	case ready == nil || ready.Status != metav1.ConditionTrue || observed < u.GetGeneration():
		return fluxArtifact{}, errFluxWaiting
	case a.URL == "":
		return fluxArtifact{}, &RejectedError{Err: fmt.Errorf("%s: status.artifact.url is empty", ref)}
	case a.Digest == "":
		return fluxArtifact{}, &RejectedError{Err: fmt.Errorf("%s: status.artifact.digest is empty", ref)}
	}
	return fluxArtifact{Revision: a.Revision, Digest: a.Digest, URL: a.URL}, nil
}
