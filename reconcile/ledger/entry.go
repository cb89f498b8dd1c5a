package ledger

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// Entry is what the ledger keeps of one running policy, in memory, between
// its syncs: what its record holds, and what tells its own objects apart.
// The zero value is ready; a nil Entry (a policy that left) keeps nothing
// and answers the zero value, so that a sync ending after its policy left
// changes nothing.
type Entry struct {
	mu sync.Mutex
	// rebuilding: the record is being rebuilt from the objects.
	rebuilding bool
	// selfTriggers is how many of its own objects the last sync passed
	// over as triggers.
	selfTriggers int
	// admitted are the admitted triggers its settings do not derive: those
	// whose events admitted them after the policy was activated, and those
	// settings since changed admitted: a trigger stays admitted while it
	// exists. derived are the settings whose admissions the listed ones
	// complete: the record's, until a sync has listed the triggers they
	// admitted and new settings do not.
	admitted sets.Set[types.UID]
	derived  *sproutv1alpha1.DerivedAdmissions
	// predating are the triggers of the activation second found to
	// predate the policy (policy.Compiled.OrderOf), kept: a later write
	// raises a trigger's version past the policy's.
	predating sets.Set[types.UID]
	// own are, for a policy whose generated resources are among its
	// trigger resources, the objects it wrote while Sprout runs, by ID:
	// what tells its own objects from triggers labelled as if they were.
	own sets.Set[string]
	// written are the resources the policy has generated objects of, from
	// its record and its syncs: the informers that find its objects.
	written sets.Set[schema.GroupVersionResource]
	// generated are the objects (per trigger, ID) a non-synchronizing
	// policy has created or found: they are never generated again; for a
	// synchronizing policy, the objects it claims (ownership.go).
	generated sets.Set[string]
	// applied is the content revision the policy's objects were last
	// synced to without error (the record's spec.applied), and
	// appliedObjects how many objects the policy had at that revision's
	// last sync (spec.appliedObjects); appliedNoted is the count last
	// counted as a change to the record.
	applied                      string
	appliedObjects, appliedNoted int
	// changes counts the changes to what the record holds (rebuilding,
	// admitted, derived, predating, written, generated, applied), and
	// saved is what the last save wrote, or found written: a save whose
	// stamp is the same has nothing to write, and need not build a record
	// of every trigger to find that out (Ledger.Save).
	changes uint64
	saved   saveStamp
}

// with runs f under the entry's lock; on a nil entry, not at all.
func (e *Entry) with(f func(*Entry)) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
}

// change runs f under the entry's lock, as a change to what the record
// holds when f reports one.
func (e *Entry) change(f func(*Entry) bool) {
	e.with(func(e *Entry) {
		if f(e) {
			e.changes++
		}
	})
}

// Rebuild marks, or unmarks, the record as being rebuilt.
func (e *Entry) Rebuild(on bool) {
	e.change(func(e *Entry) bool {
		changed := e.rebuilding != on
		e.rebuilding = on
		return changed
	})
}

// Rebuilding reports whether the record is being rebuilt: the policy
// prunes nothing meanwhile.
func (e *Entry) Rebuilding() (on bool) {
	e.with(func(e *Entry) { on = e.rebuilding })
	return on
}

// WritesTo records that the policy writes to gvrs and returns every
// resource it has written to.
func (e *Entry) WritesTo(gvrs sets.Set[schema.GroupVersionResource]) (all sets.Set[schema.GroupVersionResource]) {
	e.change(func(e *Entry) bool {
		if e.written == nil {
			e.written = sets.New[schema.GroupVersionResource]()
		}
		before := e.written.Len()
		e.written.Insert(gvrs.UnsortedList()...)
		all = e.written.Clone()
		return e.written.Len() != before
	})
	return all
}

// Written returns the resources the policy has written to.
func (e *Entry) Written() (out sets.Set[schema.GroupVersionResource]) {
	e.with(func(e *Entry) { out = e.written.Clone() })
	return out
}

// RestoreWritten takes the resources rec names as written to, unless the
// policy's syncs have recorded their own.
func (e *Entry) RestoreWritten(rec *sproutv1alpha1.PolicyInventory) {
	written := sets.New[schema.GroupVersionResource]()
	for _, r := range rec.Spec.Resources {
		written.Insert(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
	}
	e.change(func(e *Entry) bool {
		if e.written != nil {
			return false
		}
		e.written = written
		return true
	})
}

// Admit admits the trigger uid.
func (e *Entry) Admit(uid types.UID) {
	e.change(func(e *Entry) bool {
		if e.admitted.Has(uid) {
			return false
		}
		if e.admitted == nil {
			e.admitted = sets.New[types.UID]()
		}
		e.admitted.Insert(uid)
		return true
	})
}

// IsAdmitted reports whether an event admitted the trigger uid.
func (e *Entry) IsAdmitted(uid types.UID) (yes bool) {
	e.with(func(e *Entry) { yes = e.admitted.Has(uid) })
	return yes
}

// admittedList returns the admitted UIDs, for the record.
func (e *Entry) admittedList() (out []string) {
	e.with(func(e *Entry) {
		out = make([]string, 0, e.admitted.Len())
		for uid := range e.admitted {
			out = append(out, string(uid))
		}
	})
	return out
}

// Order places trigger uid against the policy, as cp.OrderOf does from
// its creation and version, unless it was found to predate the policy
// before (Predate): it does so whatever its version becomes.
func (e *Entry) Order(cp *policy.Compiled, uid types.UID, created time.Time, rv string) (o policy.Order) {
	o = cp.OrderOf(created, rv)
	if o == policy.After {
		e.with(func(e *Entry) {
			if e.predating.Has(uid) {
				o = policy.Before
			}
		})
	}
	return o
}

// Predate keeps that trigger uid, which the policy's rules select,
// predates the policy: a later write raises its version past the
// policy's, and it must not then look newer.
func (e *Entry) Predate(uid types.UID) {
	e.change(func(e *Entry) bool {
		if e.predating.Has(uid) {
			return false
		}
		if e.predating == nil {
			e.predating = sets.New[types.UID]()
		}
		e.predating.Insert(uid)
		return true
	})
}

// predatingList returns the predating UIDs, for the record.
func (e *Entry) predatingList() (out []string) {
	e.with(func(e *Entry) {
		for uid := range e.predating {
			out = append(out, string(uid))
		}
	})
	return out
}

// predate takes uids as predating the policy, from its record.
func (e *Entry) predate(uids []string) {
	for _, uid := range uids {
		e.Predate(types.UID(uid))
	}
}

// RetainAdmitted forgets the admitted and predating triggers that no
// longer exist. exists is asked without the lock held: it may take the
// core's.
func (e *Entry) RetainAdmitted(exists func(types.UID) bool) {
	var uids []types.UID
	e.with(func(e *Entry) { uids = append(e.admitted.UnsortedList(), e.predating.UnsortedList()...) })
	var gone []types.UID
	for _, uid := range uids {
		if !exists(uid) {
			gone = append(gone, uid)
		}
	}
	if len(gone) == 0 {
		return
	}
	e.change(func(e *Entry) bool {
		e.admitted.Delete(gone...)
		e.predating.Delete(gone...)
		return true
	})
}

// DerivedBy returns the settings the policy's listed admissions complete;
// ok is false when none are known (nothing derived yet, or a record that
// lists every admission).
func (e *Entry) DerivedBy() (d sproutv1alpha1.DerivedAdmissions, ok bool) {
	e.with(func(e *Entry) {
		if e.derived != nil {
			d, ok = *e.derived, true
		}
	})
	return d, ok
}

// SetDerivedBy records that the listed admissions now complete d.
func (e *Entry) SetDerivedBy(d sproutv1alpha1.DerivedAdmissions) {
	e.change(func(e *Entry) bool {
		changed := e.derived == nil || *e.derived != d
		e.derived = &d
		return changed
	})
}

// ForgetAdmissions forgets what events admitted. A policy that stops
// running and comes back under the same name is another: what it admits,
// its record says.
func (e *Entry) ForgetAdmissions() {
	e.change(func(e *Entry) bool {
		e.admitted, e.derived, e.predating = nil, nil, nil
		return true
	})
}

// Applied returns the content revision the policy's objects were last
// synced to without error, "" before any, and how many objects the
// policy had at its last sync of it.
func (e *Entry) Applied() (rev string, objects int) {
	e.with(func(e *Entry) { rev, objects = e.applied, e.appliedObjects })
	return rev, objects
}

// SetApplied records that the policy's objects, objects of them, are
// synced to rev. A new revision is written by the next save, and so is a
// count that doubled or halved since one was; a smaller change goes with
// whatever next changes the record, so that a trigger more costs no
// record write, and the count a restart reads is within a factor of two.
func (e *Entry) SetApplied(rev string, objects int) {
	e.change(func(e *Entry) bool {
		changed := e.applied != rev || objects > 2*e.appliedNoted || 2*objects < e.appliedNoted
		e.applied, e.appliedObjects = rev, objects
		if changed {
			e.appliedNoted = objects
		}
		return changed
	})
}
