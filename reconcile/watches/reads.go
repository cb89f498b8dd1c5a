package watches

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/cluster"
)

// Per-trigger dependencies: each evaluation's resource.Get and
// resource.List reads are recorded (evaluate.Reader's tape), and an index from
// read to triggers lets an event on an object a policy read mark dirty
// only the triggers whose reads cover it, for an incremental sync, instead
// of the whole policy. A Get covers the object of its namespace and name;
// a List, every object of its namespace (or of every namespace) its
// selector selects, before or after the change, so that an object leaving
// a List is seen as well as one joining it. Where the reads are not known
// for every trigger, an event on a read resource queues the policy in
// full, as before.

// MaxCovered bounds the triggers an event may mark for an incremental
// sync: past it, the policy is synced in full, which costs no more.
const MaxCovered = 4096

// maxReadsPerTrigger bounds the distinct reads kept for one evaluation.
// The CEL cost limits bound how many reads an evaluation makes only
// loosely (each costs little), so the bound is this one: past it the
// trigger's reads are untracked and its policy's read resources are
// followed in full. The index then holds at most this many reads per
// trigger of the policy's last clean syncs.
const maxReadsPerTrigger = 64

// Read is one read of an evaluation: a Get when name is set, a List of
// the objects selector selects otherwise.
type Read struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	selector  labels.Selector
	// sel is selector spelt out, by which equal selectors share an entry.
	sel string
}

// Tape records the reads of the evaluation under way.
type Tape struct {
	reads []Read
	// untracked: more reads than maxReadsPerTrigger.
	untracked bool
}

func (t *Tape) Note(d Read) {
	for _, r := range t.reads {
		if r.gvr == d.gvr && r.namespace == d.namespace && r.name == d.name && r.sel == d.sel {
			return
		}
	}
	if len(t.reads) == maxReadsPerTrigger {
		t.untracked = true
		return
	}
	t.reads = append(t.reads, d)
}

// TriggerReads is what one trigger's last evaluation read, and how to find
// the trigger again to evaluate it once more.
type TriggerReads struct {
	UID       types.UID
	GVR       schema.GroupVersionResource
	Key       string
	reads     []Read
	untracked bool
	// logged is how many events the policy's read log held when the
	// evaluation began: those it saw already, as an informer updates its
	// cache before it tells of the change.
	logged int
}

// ReadEvent is an event on an object a policy read: the object, and its
// state before the change, if any.
type ReadEvent struct {
	GVR      schema.GroupVersionResource
	Obj, Old *cluster.Object
}

type getKey struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

type listKey struct {
	gvr       schema.GroupVersionResource
	namespace string
}

// listReaders are the triggers that listed with one selector.
type listReaders struct {
	selector labels.Selector
	uids     sets.Set[types.UID]
}

// policyReads is one policy's index of reads.
type policyReads struct {
	// triggers are, by UID, the reads of the triggers its syncs evaluated;
	// nil when they are not known for every trigger: after a sync that
	// was not clean, or one a trigger's reads were untracked in.
	triggers map[types.UID]TriggerReads
	gets     map[getKey]sets.Set[types.UID]
	lists    map[listKey]map[string]*listReaders
	// syncing: a sync of the policy is evaluating. Events on what it read
	// are logged meanwhile and looked up again once its reads are in the
	// index: an evaluation may have read the object before the change and
	// the index not hold that read yet. lost: more than MaxCovered were.
	syncing bool
	log     []ReadEvent
	lost    bool
}

// ReadIndex[K] keeps, per policy, which triggers read what.
type ReadIndex[K comparable] struct {
	mu sync.Mutex
	m  map[K]*policyReads
}

// Begin notes that a sync of the policy starts evaluating.
func (x *ReadIndex[K]) Begin(key K) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[K]*policyReads{}
	}
	p := x.m[key]
	if p == nil {
		p = &policyReads{}
		x.m[key] = p
	}
	p.syncing, p.log, p.lost = true, nil, false
}

// Covered returns the triggers whose reads cover ev, and whether the policy
// must be synced in full instead: its reads are not known per trigger, or
// too many triggers read the object for an incremental sync.
func (x *ReadIndex[K]) Covered(key K, ev ReadEvent) ([]TriggerReads, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := x.m[key]
	switch {
	case p == nil:
		return nil, true
	case p.syncing && len(p.log) < MaxCovered:
		p.log = append(p.log, ev)
	case p.syncing:
		p.lost = true
	}
	if p.triggers == nil {
		// Unknown until the sync under way ends, which looks ev up then.
		return nil, !p.syncing
	}
	return p.readers(ev)
}

// readers returns the triggers whose reads cover ev; true when there are
// more than an incremental sync takes.
func (p *policyReads) readers(ev ReadEvent) ([]TriggerReads, bool) {
	var uids sets.Set[types.UID] // most events cover nothing: made on the first
	cover := func(s sets.Set[types.UID]) {
		if uids == nil && s.Len() > 0 {
			uids = sets.New[types.UID]()
		}
		for uid := range s {
			uids.Insert(uid)
		}
	}
	for _, o := range []*cluster.Object{ev.Obj, ev.Old} {
		if o == nil {
			continue
		}
		cover(p.gets[getKey{gvr: ev.GVR, namespace: o.GetNamespace(), name: o.GetName()}])
		var set labels.Set // decoded once, if a List of its namespace was read
		decoded := false
		for _, ns := range []string{o.GetNamespace(), ""} {
			for _, l := range p.lists[listKey{gvr: ev.GVR, namespace: ns}] {
				if !decoded {
					set, decoded = labels.Set(o.Selectable(true).Labels), true
				}
				if l.selector.Matches(set) {
					cover(l.uids)
				}
			}
			if ns == "" {
				break // cluster-scoped: listed with namespace "" only
			}
		}
	}
	if uids.Len() > MaxCovered {
		return nil, true
	}
	out := make([]TriggerReads, 0, uids.Len())
	for uid := range uids {
		out = append(out, p.triggers[uid])
	}
	return out, false
}

// add indexes the reads of one trigger.
func (p *policyReads) add(tr TriggerReads) {
	if len(tr.reads) == 0 {
		return
	}
	p.triggers[tr.UID] = tr
	for _, d := range tr.reads {
		if d.selector == nil {
			k := getKey{gvr: d.gvr, namespace: d.namespace, name: d.name}
			if p.gets[k] == nil {
				p.gets[k] = sets.New[types.UID]()
			}
			p.gets[k].Insert(tr.UID)
			continue
		}
		k := listKey{gvr: d.gvr, namespace: d.namespace}
		if p.lists[k] == nil {
			p.lists[k] = map[string]*listReaders{}
		}
		l := p.lists[k][d.sel]
		if l == nil {
			l = &listReaders{selector: d.selector, uids: sets.New[types.UID]()}
			p.lists[k][d.sel] = l
		}
		l.uids.Insert(tr.UID)
	}
}

// remove forgets the reads of the trigger uid.
func (p *policyReads) remove(uid types.UID) {
	tr, ok := p.triggers[uid]
	if !ok {
		return
	}
	delete(p.triggers, uid)
	for _, d := range tr.reads {
		if d.selector == nil {
			k := getKey{gvr: d.gvr, namespace: d.namespace, name: d.name}
			if p.gets[k].Delete(uid).Len() == 0 {
				delete(p.gets, k)
			}
			continue
		}
		k := listKey{gvr: d.gvr, namespace: d.namespace}
		if l := p.lists[k][d.sel]; l != nil && l.uids.Delete(uid).Len() == 0 {
			delete(p.lists[k], d.sel)
			if len(p.lists[k]) == 0 {
				delete(p.lists, k)
			}
		}
	}
}

// End ends the sync that began: the reads of the triggers in dirty are
// replaced by those in evaluated, over the index of a full sync (full: a
// new one) or of the last sync (an incremental one). Without ok (the sync
// was not clean, or stopped), the reads are unknown until a full sync
// knows them again. It returns the triggers whose reads cover what changed
// while the sync evaluated, and whether the policy must be synced in full
// for it instead.
func (x *ReadIndex[K]) End(key K, ok, full bool, dirty []types.UID, evaluated []TriggerReads) ([]TriggerReads, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := x.m[key]
	if p == nil || !p.syncing {
		return nil, false // ended already, or the policy is gone
	}
	log, lost := p.log, p.lost
	p.syncing, p.log, p.lost = false, nil, false
	if full {
		p.triggers = map[types.UID]TriggerReads{}
		p.gets, p.lists = map[getKey]sets.Set[types.UID]{}, map[listKey]map[string]*listReaders{}
	}
	if !ok || p.triggers == nil || lost {
		delete(x.m, key) // unknown: what changed queues the policy in full
		return nil, len(log) > 0 || lost
	}
	for _, uid := range dirty {
		p.remove(uid)
	}
	logged := make(map[types.UID]int, len(evaluated))
	for _, tr := range evaluated {
		if tr.untracked {
			delete(x.m, key)
			return nil, len(log) > 0
		}
		p.add(tr)
		logged[tr.UID] = tr.logged
	}
	var out []TriggerReads
	for i, ev := range log {
		trs, tooMany := p.readers(ev)
		if tooMany {
			return nil, true
		}
		for _, tr := range trs {
			// Not for a trigger whose evaluation began after the change:
			// it read the object as changed.
			if n, ok := logged[tr.UID]; !ok || i >= n {
				out = append(out, tr)
			}
		}
	}
	return out, false
}

// Logged returns how many events the policy's read log holds: an
// evaluation beginning sees those.
func (x *ReadIndex[K]) Logged(key K) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p := x.m[key]; p != nil {
		return len(p.log)
	}
	return 0
}

// Drop forgets a policy's reads: it is gone.
func (x *ReadIndex[K]) Drop(key K) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, key)
}

// GetRead is a resource.Get of namespace/name.
func GetRead(gvr schema.GroupVersionResource, namespace, name string) Read {
	return Read{gvr: gvr, namespace: namespace, name: name}
}

// ListRead is a resource.List of namespace ("" for every one) with selector.
func ListRead(gvr schema.GroupVersionResource, namespace string, selector labels.Selector) Read {
	return Read{gvr: gvr, namespace: namespace, selector: selector, sel: selector.String()}
}

// Empty reports whether the tape recorded nothing to index.
func (t *Tape) Empty() bool { return len(t.reads) == 0 && !t.untracked }

// Of is what the tape recorded as the reads of trigger uid, of gvr under
// cache key, whose evaluation began when the policy's read log held logged
// events.
func (t *Tape) Of(uid types.UID, gvr schema.GroupVersionResource, key string, logged int) TriggerReads {
	return TriggerReads{UID: uid, GVR: gvr, Key: key, reads: t.reads, untracked: t.untracked, logged: logged}
}

// Len counts the policies the index holds.
func (x *ReadIndex[K]) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.m)
}
