package reconcile

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/cluster"
)

// Per-trigger dependencies: each evaluation's resource.Get and
// resource.List reads are recorded (cacheReader's tape), and an index from
// read to triggers lets an event on an object a policy read mark dirty
// only the triggers whose reads cover it, for an incremental sync, instead
// of the whole policy. A Get covers the object of its namespace and name;
// a List, every object of its namespace (or of every namespace) its
// selector selects, before or after the change, so that an object leaving
// a List is seen as well as one joining it. Where the reads are not known
// for every trigger, an event on a read resource queues the policy in
// full, as before.

// maxReadsPerTrigger bounds the distinct reads kept for one evaluation.
// The CEL cost limits bound how many reads an evaluation makes only
// loosely (each costs little), so the bound is this one: past it the
// trigger's reads are untracked and its policy's read resources are
// followed in full. The index then holds at most this many reads per
// trigger of the policy's last clean syncs.
const maxReadsPerTrigger = 64

// readDep is one read of an evaluation: a Get when name is set, a List of
// the objects selector selects otherwise.
type readDep struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	selector  labels.Selector
	// sel is selector spelt out, by which equal selectors share an entry.
	sel string
}

// readTape records the reads of the evaluation under way.
type readTape struct {
	reads []readDep
	// untracked: more reads than maxReadsPerTrigger.
	untracked bool
}

func (t *readTape) note(d readDep) {
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

// triggerReads is what one trigger's last evaluation read, and how to find
// the trigger again to evaluate it once more.
type triggerReads struct {
	uid       types.UID
	gvr       schema.GroupVersionResource
	key       string
	reads     []readDep
	untracked bool
	// logged is how many events the policy's read log held when the
	// evaluation began: those it saw already, as an informer updates its
	// cache before it tells of the change.
	logged int
}

// readEvent is an event on an object a policy read: the object, and its
// state before the change, if any.
type readEvent struct {
	gvr      schema.GroupVersionResource
	obj, old *cluster.Object
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
	triggers map[types.UID]triggerReads
	gets     map[getKey]sets.Set[types.UID]
	lists    map[listKey]map[string]*listReaders
	// syncing: a sync of the policy is evaluating. Events on what it read
	// are logged meanwhile and looked up again once its reads are in the
	// index: an evaluation may have read the object before the change and
	// the index not hold that read yet. lost: more than maxDirty were.
	syncing bool
	log     []readEvent
	lost    bool
}

// readIndex keeps, per policy, which triggers read what.
type readIndex struct {
	mu sync.Mutex
	m  map[policyKey]*policyReads
}

// begin notes that a sync of the policy starts evaluating.
func (x *readIndex) begin(key policyKey) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[policyKey]*policyReads{}
	}
	p := x.m[key]
	if p == nil {
		p = &policyReads{}
		x.m[key] = p
	}
	p.syncing, p.log, p.lost = true, nil, false
}

// covered returns the triggers whose reads cover ev, and whether the policy
// must be synced in full instead: its reads are not known per trigger, or
// too many triggers read the object for an incremental sync.
func (x *readIndex) covered(key policyKey, ev readEvent) ([]triggerReads, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := x.m[key]
	switch {
	case p == nil:
		return nil, true
	case p.syncing && len(p.log) < maxDirty:
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
func (p *policyReads) readers(ev readEvent) ([]triggerReads, bool) {
	var uids sets.Set[types.UID] // most events cover nothing: made on the first
	cover := func(s sets.Set[types.UID]) {
		if uids == nil && s.Len() > 0 {
			uids = sets.New[types.UID]()
		}
		for uid := range s {
			uids.Insert(uid)
		}
	}
	for _, o := range []*cluster.Object{ev.obj, ev.old} {
		if o == nil {
			continue
		}
		cover(p.gets[getKey{gvr: ev.gvr, namespace: o.GetNamespace(), name: o.GetName()}])
		var set labels.Set // decoded once, if a List of its namespace was read
		decoded := false
		for _, ns := range []string{o.GetNamespace(), ""} {
			for _, l := range p.lists[listKey{gvr: ev.gvr, namespace: ns}] {
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
	if uids.Len() > maxDirty {
		return nil, true
	}
	out := make([]triggerReads, 0, uids.Len())
	for uid := range uids {
		out = append(out, p.triggers[uid])
	}
	return out, false
}

// add indexes the reads of one trigger.
func (p *policyReads) add(tr triggerReads) {
	if len(tr.reads) == 0 {
		return
	}
	p.triggers[tr.uid] = tr
	for _, d := range tr.reads {
		if d.selector == nil {
			k := getKey{gvr: d.gvr, namespace: d.namespace, name: d.name}
			if p.gets[k] == nil {
				p.gets[k] = sets.New[types.UID]()
			}
			p.gets[k].Insert(tr.uid)
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
		l.uids.Insert(tr.uid)
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

// end ends the sync that began: the reads of the triggers in dirty are
// replaced by those in evaluated, over the index of a full sync (full: a
// new one) or of the last sync (an incremental one). Without ok (the sync
// was not clean, or stopped), the reads are unknown until a full sync
// knows them again. It returns the triggers whose reads cover what changed
// while the sync evaluated, and whether the policy must be synced in full
// for it instead.
func (x *readIndex) end(key policyKey, ok, full bool, dirty []types.UID, evaluated []triggerReads) ([]triggerReads, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := x.m[key]
	if p == nil || !p.syncing {
		return nil, false // ended already, or the policy is gone
	}
	log, lost := p.log, p.lost
	p.syncing, p.log, p.lost = false, nil, false
	if full {
		p.triggers = map[types.UID]triggerReads{}
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
		logged[tr.uid] = tr.logged
	}
	var out []triggerReads
	for i, ev := range log {
		trs, tooMany := p.readers(ev)
		if tooMany {
			return nil, true
		}
		for _, tr := range trs {
			// Not for a trigger whose evaluation began after the change:
			// it read the object as changed.
			if n, ok := logged[tr.uid]; !ok || i >= n {
				out = append(out, tr)
			}
		}
	}
	return out, false
}

// logged returns how many events the policy's read log holds: an
// evaluation beginning sees those.
func (x *readIndex) logged(key policyKey) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p := x.m[key]; p != nil {
		return len(p.log)
	}
	return 0
}

// drop forgets a policy's reads: it is gone.
func (x *readIndex) drop(key policyKey) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, key)
}

// queueReaders queues, for an event on an object of gvr that the policy's
// evaluations read, the triggers whose last evaluation read it. It reports
// false when the policy must be queued in full instead.
func (c *Controller) queueReaders(key policyKey, gvr schema.GroupVersionResource, o, old *cluster.Object) bool {
	readers, full := c.reads.covered(key, readEvent{gvr: gvr, obj: o, old: old})
	if full {
		return false
	}
	c.markReaders(key, readers)
	return true
}

// markReaders queues the policy for the triggers that read what changed.
// Their own objects did not change, so only their key is given: their
// evaluation, which read another object, was not kept.
func (c *Controller) markReaders(key policyKey, readers []triggerReads) {
	for _, tr := range readers {
		c.queue.addTrigger(key, tr.uid, dirtyTrigger{gvr: tr.gvr, key: tr.key}, 0)
	}
}

// endReads ends what the sync of run began in the read index (ok: it was
// clean and its reads are to be kept), and queues what changed meanwhile.
func (c *Controller) endReads(run *syncRun, ok bool, dirty []types.UID, evaluated []triggerReads) {
	readers, full := c.reads.end(run.key, ok, !run.incremental, dirty, evaluated)
	if full {
		c.queue.Add(run.key)
		return
	}
	c.markReaders(run.key, readers)
}
