package inventory

import (
	"slices"
	"sync"
	"sync/atomic"
	"unique"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/internal/gopool"
)

// Decisions remembers, for one policy, the desired objects the cache last
// showed unchanged, or that were written over the copy the cache still
// holds (none for a create), by the identity of the desired and the cached
// object.
// Neither is ever modified: an informer replaces a cached object when it
// changes, and desired objects kept by an evaluation memo are shared,
// read-only. So a sync that meets the same pair again decides Unchanged
// without comparing them, and Stale passes over the cached objects so
// found desired. On a sync where ten triggers of 10,000 changed, the other
// 9,990 cost a cache lookup each.
//
// A sync's use of the Decisions is a Round: the Apply calls given it, which
// may take the desired objects a part at a time, and the groups it settles.
// Each round keeps only the pairs it saw, so the memory follows the
// desired set.
type Decisions struct {
	mu sync.Mutex
	// unchanged maps a desired object to its cached copy and change, as the
	// last round left it; next is the open round's.
	unchanged, next map[*unstructured.Unstructured]*unchangedPair
	// claimed are the cached objects of the last round's unchanged pairs.
	claimed, nextClaimed map[*cluster.Object]struct{}
	// objects are the last round's desired objects, settled its settled
	// ones; rounds counts them.
	objects []*unstructured.Unstructured
	settled []Settled
	rounds  int
}

// Round is one sync's pass over a policy's desired objects: the Apply calls
// given it (ApplyOptions.Round), each with a part of them and some at once,
// the groups it settles, then End. A round ended early, by a sync that stopped half-way,
// only makes the next one compare more. A Decisions has one round open at a
// time: its policy's sync.
type Round struct {
	d *Decisions
	// objects are the desired objects given in full and not settled;
	// settled, those given or settled as Settled.
	objects []*unstructured.Unstructured
	settled []Settled
	// down is the error that said the API server cannot serve: the objects
	// of later Apply calls are not tried.
	down atomic.Pointer[error]
	// requests run the requests of all the round's Apply calls, which may
	// overlap, on one bound: a call's last requests do not hold the next
	// back.
	requests *gopool.Pool
}

// Begin opens a round. Whatever a round not ended left is forgotten.
func (d *Decisions) Begin() *Round {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.next)
	clear(d.nextClaimed)
	return &Round{d: d, requests: gopool.New(applyParallelism)}
}

// add counts objects and settled among what the round was given.
func (r *Round) add(objects []*unstructured.Unstructured, settled []Settled) {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.objects = append(r.objects, objects...)
	r.settled = append(r.settled, settled...)
}

// Settled stands for desired objects known to be in the cluster as
// desired, which their caller no longer keeps: each object's identity and
// version, the cached copy of that version once the cache holds it, and
// the change decided. An object settles when the cache showed it unchanged,
// or when a create made it holding every desired field; a kept evaluation
// settles once all its objects have, so that 10,000 unchanged objects cost
// an identity and a change each, not a copy of each. While the cache holds
// those versions (Holds), the objects need no write and no comparison, and
// an Apply that is handed them (ApplyOptions.Settled) reports them
// Unchanged.
type Settled struct {
	objects []settledObject
}

// settledObject is one object settled: 50,000 of them are kept by 50
// policies of 1,000 triggers, so it is kept small. Its change is always
// Unchanged: only the ID and the trigger are its own.
type settledObject struct {
	kind                             unique.Handle[schema.GroupVersionKind]
	namespace, name, resourceVersion string
	// cached is the cache's copy of resourceVersion; nil for an object
	// created since, until the cache shows it (Holds adopts it then).
	cached         *cluster.Object
	id, triggerUID string
}

func (o *settledObject) key() objectKey {
	return objectKey{o.kind.Value().GroupKind(), o.namespace, o.name}
}

func (o *settledObject) change() Change {
	return Change{ID: o.id, Action: Unchanged, TriggerUID: o.triggerUID}
}

// Len is the number of objects settled.
func (s Settled) Len() int { return len(s.objects) }

// settledLen is the number of objects all of ss settled.
func settledLen(ss []Settled) int {
	n := 0
	for _, s := range ss {
		n += s.Len()
	}
	return n
}

// Pending reports whether an object settled at its create is not cached
// yet: until then, only a lookup tells whether it still holds.
func (s Settled) Pending() bool {
	for _, o := range s.objects {
		if o.cached == nil {
			return true
		}
	}
	return false
}

// Holds reports whether live still holds the version of every object that
// s settled, or has yet to see an object created: otherwise the objects
// must be compared again, and their caller must give them in full. A
// copy of the settled version cached since, or listed again, is adopted,
// so that the next check compares addresses.
func (s Settled) Holds(live Live) bool {
	for i := range s.objects {
		o := &s.objects[i]
		gvk := o.kind.Value()
		cur, ok := live.Get(gvk, o.namespace, o.name)
		switch {
		case ok && cur == o.cached:
		case ok && cur.GetResourceVersion() == o.resourceVersion:
			o.cached = cur
		case ok:
			return false // changed since
		case o.cached == nil && !live.Seen(gvk, o.resourceVersion):
			// Created, and the cache has yet to show it.
		default:
			return false // deleted since
		}
	}
	return true
}

// Settle returns each group of desired objects settled, when the round's
// Apply calls found every one of them unchanged in the cache or created it
// as desired; for a group one of which was written over a copy the cache
// still shows, or was not given, an empty Settled. The round then stands as
// if it had been given the groups settled rather than their objects: the
// Decisions no longer hold those objects, and neither need their caller.
func (r *Round) Settle(groups ...[]*unstructured.Unstructured) []Settled {
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Settled, len(groups))
	released := map[*unstructured.Unstructured]struct{}{}
	for i, objects := range groups {
		s, ok := d.settle(objects)
		if !ok {
			continue
		}
		out[i] = s
		r.settled = append(r.settled, s)
		for _, obj := range objects {
			delete(d.next, obj)
			released[obj] = struct{}{}
		}
	}
	if len(released) > 0 {
		r.objects = slices.DeleteFunc(r.objects, func(obj *unstructured.Unstructured) bool {
			_, ok := released[obj]
			return ok
		})
	}
	return out
}

// settle returns objects settled, if the open round found them all so.
func (d *Decisions) settle(objects []*unstructured.Unstructured) (Settled, bool) {
	out := Settled{objects: make([]settledObject, 0, len(objects))}
	for _, obj := range objects {
		p, ok := d.next[obj]
		if !ok || p.change != (Change{ID: p.change.ID, Action: Unchanged, TriggerUID: p.change.TriggerUID}) {
			return Settled{}, false
		}
		o := settledObject{id: p.change.ID, triggerUID: p.change.TriggerUID}
		switch {
		case p.cached != nil && p.written == "":
			c := p.cached
			o.kind, o.namespace, o.name, o.resourceVersion, o.cached = c.Kind(), c.GetNamespace(), c.GetName(), c.GetResourceVersion(), c
			// Found unchanged: the cached version holds obj entire.
			c.Release(metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationApplied))
		case p.cached == nil && p.written != "":
			m := metadataStrings(obj, "")
			o.kind, o.namespace, o.name, o.resourceVersion = unique.Make(cluster.KindOf(obj)), cluster.Intern(m.get("namespace")), cluster.Intern(m.get("name")), p.written
		default:
			return Settled{}, false
		}
		out.objects = append(out.objects, o)
	}
	return out, true
}

type unchangedPair struct {
	cached *cluster.Object
	change Change
	key    objectKey
	// written is, for an object written over cached, the version the
	// write made.
	written string
}

// NewDecisions returns an empty memo, for the lifetime of one compiled
// policy: its objects and settings (Synchronize) do not change meanwhile.
func NewDecisions() *Decisions {
	return &Decisions{
		unchanged: map[*unstructured.Unstructured]*unchangedPair{}, next: map[*unstructured.Unstructured]*unchangedPair{},
		claimed: map[*cluster.Object]struct{}{}, nextClaimed: map[*cluster.Object]struct{}{},
	}
}

// get returns the change decided for desired when cached was the same.
func (d *Decisions) get(desired *unstructured.Unstructured, cached *cluster.Object) (Change, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.unchanged[desired]
	if !ok {
		return Change{}, false
	}
	if p.cached != cached {
		if p.written == "" || !older(cached, p.written) {
			return Change{}, false
		}
		// A copy from before the write (one the write passed through):
		// the cache has yet to show the write.
		p = &unchangedPair{cached: cached, change: p.change, key: p.key, written: p.written}
	}
	d.keep(desired, p)
	return p.change, true
}

// created returns the change decided for desired when the last round
// created it and the cache has yet to show the version the create made:
// the object exists, and a write now would only fail. Once the cache has
// passed that version without it, it was deleted since: not decided.
func (d *Decisions) created(desired *unstructured.Unstructured, live Live) (Change, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.unchanged[desired]
	if !ok || p.cached != nil || p.written == "" || live.Seen(cluster.KindOf(desired), p.written) {
		return Change{}, false
	}
	d.keep(desired, p)
	return p.change, true
}

// older reports whether cached is a version from before resourceVersion
// written, when the two compare (KEP-5504; etcd's versions do).
func older(cached *cluster.Object, written string) bool {
	c, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), written)
	return err == nil && c < 0
}

// wrote remembers that desired was written over cached (nil: created),
// making version written: until the cache shows that version, its copies
// are from before the write, or it has none, and the next sync must not
// write again. Any change after the write comes after it, and is compared.
func (d *Decisions) wrote(desired *unstructured.Unstructured, cached *cluster.Object, written string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keep(desired, &unchangedPair{cached: cached, change: changeOf(desired, Unchanged, ""), key: keyOf(desired), written: written})
}

// put remembers that desired was found unchanged in cached.
func (d *Decisions) put(desired *unstructured.Unstructured, cached *cluster.Object, ch Change) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keep(desired, &unchangedPair{cached: cached, change: ch, key: keyOf(desired)})
}

func (d *Decisions) keep(desired *unstructured.Unstructured, p *unchangedPair) {
	d.next[desired] = p
	if p.cached != nil {
		d.nextClaimed[p.cached] = struct{}{}
	}
}

// End closes the round: the Decisions forget the pairs it did not see,
// and the goroutines of its requests end.
func (r *Round) End() {
	r.requests.Stop()
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	d.objects, d.settled = r.objects, r.settled
	for _, s := range r.settled {
		for _, o := range s.objects {
			if o.cached != nil {
				d.nextClaimed[o.cached] = struct{}{}
			}
		}
	}
	d.rounds++
	// The last round's maps are cleared for the next rather than new ones
	// made, as the evaluation memo's are.
	d.unchanged, d.next = d.next, d.unchanged
	d.claimed, d.nextClaimed = d.nextClaimed, d.claimed
	clear(d.next)
	clear(d.nextClaimed)
}

// Stale returns the owned objects that the last round's objects do not
// hold and whose origin Sprout signed, as stale does; before any round,
// none. A cached object paired then is
// desired without a comparison; the others are compared with the objects
// not paired and those created in the round (on a sync that changed
// little, the few it wrote), and only those still unmatched, a cached
// object replaced since, with all.
func (d *Decisions) Stale(owned []*cluster.Object) []*cluster.Object {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rounds == 0 {
		return nil // nothing applied: what is desired is unknown
	}
	var unpaired []*cluster.Object
	for _, o := range owned {
		if _, ok := d.claimed[o]; !ok && o.Proven() {
			unpaired = append(unpaired, o)
		}
	}
	if len(unpaired) == 0 {
		return nil
	}
	// Compared first with the few objects the round wrote: those given in
	// full and not paired, and those settled at their create, whose cached
	// copy came after the round (most often, a sync's one new object).
	written := map[objectKey]bool{}
	for _, x := range d.objects {
		if _, ok := d.unchanged[x]; !ok {
			written[keyOf(x)] = true
		}
	}
	for _, s := range d.settled {
		for i := range s.objects {
			if s.objects[i].cached == nil {
				written[s.objects[i].key()] = true
			}
		}
	}
	var all map[objectKey]bool
	var out []*cluster.Object
	for _, o := range unpaired {
		k := cachedKey(o)
		if written[k] {
			continue
		}
		if all == nil {
			all = make(map[objectKey]bool, len(d.unchanged)+settledLen(d.settled))
			for _, p := range d.unchanged {
				all[p.key] = true
			}
			for _, s := range d.settled {
				for i := range s.objects {
					all[s.objects[i].key()] = true
				}
			}
		}
		if !all[k] && !o.OnDelete() {
			out = append(out, o)
		}
	}
	return out
}
