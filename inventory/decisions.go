package inventory

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Decisions remembers, for one policy, the desired objects the cache last
// showed unchanged, or that were written over the copy the cache still
// holds, by the identity of the desired and the cached object.
// Neither is ever modified: an informer replaces a cached object when it
// changes, and desired objects kept by an evaluation memo are shared,
// read-only. So a sync that meets the same pair again decides Unchanged
// without comparing them, and Stale passes over the cached objects so
// found desired. On a sync where ten triggers of 10,000 changed, the other
// 9,990 cost a cache lookup each.
//
// Apply's calls with the same Decisions form rounds: each round keeps only
// the pairs it saw, so the memory follows the desired set.
type Decisions struct {
	mu sync.Mutex
	// unchanged maps a desired object to its cached copy and change.
	unchanged, next map[*unstructured.Unstructured]*unchangedPair
	// claimed are the cached objects of the last round's unchanged pairs.
	claimed, nextClaimed map[*Cached]struct{}
	// objects are the last round's desired objects, settled its settled
	// ones; rounds counts them.
	objects []*unstructured.Unstructured
	settled []Settled
	rounds  int
}

// Settled stands for desired objects that the cache showed unchanged and
// that their caller no longer keeps: what the cache held then, and the
// change decided. While the cache still holds those very copies, the
// objects need no write and no comparison (Holds), and an Apply that is
// handed them (ApplyOptions.Settled) reports them Unchanged. A kept
// evaluation settles once its objects are confirmed, so that 10,000
// unchanged objects cost a pointer and a change each, not a copy of each.
type Settled struct {
	objects []settledObject
}

type settledObject struct {
	cached *Cached
	change Change
}

// Len is the number of objects settled.
func (s Settled) Len() int { return len(s.objects) }

// Holds reports whether live still holds every copy that s was settled
// against: otherwise the objects must be compared again, and their caller
// must give them in full.
func (s Settled) Holds(live Live) bool {
	for _, o := range s.objects {
		if cur, ok := live.Get(o.cached.gvk, o.cached.namespace, o.cached.name); !ok || cur != o.cached {
			return false
		}
	}
	return true
}

// Settle returns objects settled, when the last round found every one of
// them unchanged in the cache; not when one was written since the cache
// last showed it, or was not seen.
func (d *Decisions) Settle(objects []*unstructured.Unstructured) (Settled, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := Settled{objects: make([]settledObject, 0, len(objects))}
	for _, obj := range objects {
		p, ok := d.unchanged[obj]
		if !ok || p.written != "" {
			return Settled{}, false
		}
		out.objects = append(out.objects, settledObject{cached: p.cached, change: p.change})
	}
	return out, true
}

type unchangedPair struct {
	cached *Cached
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
		claimed: map[*Cached]struct{}{}, nextClaimed: map[*Cached]struct{}{},
	}
}

// get returns the change decided for desired when cached was the same.
func (d *Decisions) get(desired *unstructured.Unstructured, cached *Cached) (Change, bool) {
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
	if !ok || p.cached != nil || p.written == "" || live.Seen(KindOf(desired), p.written) {
		return Change{}, false
	}
	d.keep(desired, p)
	return p.change, true
}

// Confirm compares the objects the last round created with the copies the
// cache holds now, as the next round would, and remembers those found
// unchanged, so that they may settle without another sync. It returns how
// many objects created are not cached yet. Nothing is written: a created
// object found otherwise (changed since) is left to the next round.
func (d *Decisions) Confirm(objects []*unstructured.Unstructured, live Live, opts ApplyOptions) (waiting int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, obj := range objects {
		p, ok := d.unchanged[obj]
		if !ok || p.cached != nil || p.written == "" {
			continue
		}
		cached, ok := cachedOf(live, obj)
		if !ok || older(cached, p.written) {
			waiting++
			continue
		}
		if decideCached(obj, cached, opts).action == Unchanged {
			d.unchanged[obj] = &unchangedPair{cached: cached, change: p.change, key: p.key}
			d.claimed[cached] = struct{}{}
		}
	}
	return waiting
}

// older reports whether cached is a version from before resourceVersion
// written, when the two compare (KEP-5504; etcd's versions do).
func older(cached *Cached, written string) bool {
	c, err := resourceversion.CompareResourceVersion(cached.resourceVersion, written)
	return err == nil && c < 0
}

// wrote remembers that desired was written over cached (nil: created),
// making version written: until the cache shows that version, its copies
// are from before the write, or it has none, and the next sync must not
// write again. Any change after the write comes after it, and is compared.
func (d *Decisions) wrote(desired *unstructured.Unstructured, cached *Cached, written string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keep(desired, &unchangedPair{cached: cached, change: changeOf(desired, Unchanged, ""), key: keyOf(desired), written: written})
}

// put remembers that desired was found unchanged in cached.
func (d *Decisions) put(desired *unstructured.Unstructured, cached *Cached, ch Change) {
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

// endRound forgets the pairs the round, which applied objects and was
// handed settled ones, did not see.
func (d *Decisions) endRound(objects []*unstructured.Unstructured, settled []Settled) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.objects, d.settled = objects, settled
	for _, s := range settled {
		for _, o := range s.objects {
			d.nextClaimed[o.cached] = struct{}{}
		}
	}
	d.rounds++
	d.unchanged, d.next = d.next, make(map[*unstructured.Unstructured]*unchangedPair, len(d.next))
	d.claimed, d.nextClaimed = d.nextClaimed, make(map[*Cached]struct{}, len(d.nextClaimed))
}

// Stale returns the owned objects that the last Apply's objects do not
// hold, as stale does; before any Apply, none. A cached object paired then is
// desired without a comparison; the others are compared with the objects
// not paired (on a sync that changed little, the few it wrote), and only
// those still unmatched, a cached object replaced since, with all.
func (d *Decisions) Stale(owned []*Cached) []*Cached {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rounds == 0 {
		return nil // nothing applied: what is desired is unknown
	}
	var unpaired []*Cached
	for _, o := range owned {
		if _, ok := d.claimed[o]; !ok {
			unpaired = append(unpaired, o)
		}
	}
	if len(unpaired) == 0 {
		return nil
	}
	written := map[objectKey]bool{}
	for _, x := range d.objects {
		if _, ok := d.unchanged[x]; !ok {
			written[keyOf(x)] = true
		}
	}
	var all map[objectKey]bool
	var out []*Cached
	for _, o := range unpaired {
		k := o.key()
		if written[k] {
			continue
		}
		if all == nil {
			all = make(map[objectKey]bool, len(d.unchanged))
			for _, p := range d.unchanged {
				all[p.key] = true
			}
			for _, s := range d.settled {
				for _, o := range s.objects {
					all[o.cached.key()] = true
				}
			}
		}
		if !all[k] && !o.onDelete {
			out = append(out, o)
		}
	}
	return out
}
