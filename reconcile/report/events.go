package report

import (
	"sync"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/lru"
)

// client-go's spam filter lets this many Events about one object and of one
// type through at once, then one every five minutes.
const (
	eventSpamBurst = 25
	eventSpamEvery = 300 // seconds
	eventSpamKeys  = 4096
)

// sparingRecorder drops, before it is made, an Event that the recorder's
// own spam filter would drop once made, correlated and aggregated: a policy
// whose triggers change many times a second syncs as often, and each sync
// that writes tells it, yet after the first burst client-go sends about
// one such Event in five minutes. It keys and limits as that filter does
// (the object and the Event's type, with its burst and rate), so an Event
// it lets through is one client-go would send as well.
type sparingRecorder struct {
	record.EventRecorder
	mu      sync.Mutex
	buckets *lru.Cache
}

// NewSparingRecorder passes r the Events client-go's spam filter would send.
func NewSparingRecorder(r record.EventRecorder) record.EventRecorder {
	return &sparingRecorder{EventRecorder: r, buckets: lru.New(eventSpamKeys)}
}

func (r *sparingRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	if r.allow(object, eventtype) {
		r.EventRecorder.Event(object, eventtype, reason, message)
	}
}

func (r *sparingRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r.allow(object, eventtype) {
		r.EventRecorder.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

func (r *sparingRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if r.allow(object, eventtype) {
		r.EventRecorder.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}

// allow reports whether an Event of that type about object may go on; one
// whose object it cannot tell always may.
func (r *sparingRecorder) allow(object runtime.Object, eventtype string) bool {
	key, ok := spamKey(object, eventtype)
	if !ok {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.buckets.Get(key)
	if !ok {
		b = rate.NewLimiter(rate.Limit(1.0/eventSpamEvery), eventSpamBurst)
		r.buckets.Add(key, b)
	}
	return b.(*rate.Limiter).Allow()
}

type eventSpamKey struct {
	apiVersion, kind, namespace, name, uid, eventtype string
}

func spamKey(object runtime.Object, eventtype string) (eventSpamKey, bool) {
	if ref, ok := object.(*corev1.ObjectReference); ok {
		return eventSpamKey{ref.APIVersion, ref.Kind, ref.Namespace, ref.Name, string(ref.UID), eventtype}, true
	}
	m, err := meta.Accessor(object)
	if err != nil {
		return eventSpamKey{}, false
	}
	apiVersion, kind := object.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	return eventSpamKey{apiVersion, kind, m.GetNamespace(), m.GetName(), string(m.GetUID()), eventtype}, true
}
