package report

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/cluster"
)

// Told is what has been told of one policy: the generation marked
// Reconciling, the outcome written, the failure and the conflicts told in
// Events, the permission verdict reported, and the status last written.
// The core keeps one with each policy's state, so that it goes when the
// policy does. The zero value is ready; a nil Told, the telling of a
// policy that no longer runs, keeps nothing and answers the zero value.
type Told struct {
	mu sync.Mutex
	// progressed is the generation last marked Reconciling.
	progressed int64
	// summary is the summary of the last outcome written to the status.
	summary *string
	// failure is the failure last told in an Event ("reason: message").
	failure *string
	// verdict is the RBACPermissionsGranted verdict the last sync reported.
	verdict *Verdict
	// conflicts are the objects another policy owns that this one was
	// told of, with that owner: each is told once.
	conflicts sets.Set[string]
	// status is the status last written, until the cache holds it.
	status writtenStatus
}

// writtenStatus is the status a write of the policy's status returned,
// kept until the cache holds a copy of the policy that has seen it: the
// running copy of the policy, from the cache, may be older, and compared
// with the cache alone, a status changed and changed back before the cache
// saw the change (a count up then down) would not be written back.
type writtenStatus struct {
	version string
	status  *apiv1.GeneratingPolicyStatus
}

// with runs f under the lock; on a nil Told, not at all.
func (t *Told) with(f func(*Told)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
}

// Progress records gen as marked Reconciling and reports whether it was
// not already.
func (t *Told) Progress(gen int64) (first bool) {
	t.with(func(t *Told) { first, t.progressed = t.progressed != gen, gen })
	return first
}

// tell records the summary of the outcome written.
func (t *Told) tell(summary string) { t.with(func(t *Told) { t.summary = &summary }) }

// lastTold returns the summary of the outcome last written, if any.
func (t *Told) lastTold() (summary *string) {
	t.with(func(t *Told) { summary = t.summary })
	return summary
}

// fail records failure ("" for none) and returns the failure told before,
// if any.
func (t *Told) fail(failure string) (before *string) {
	t.with(func(t *Told) { before, t.failure = t.failure, &failure })
	return before
}

// Granted keeps the verdict a sync reported.
func (t *Told) Granted(v *Verdict) { t.with(func(t *Told) { t.verdict = v }) }

// Reported returns the verdict last reported, or nil.
func (t *Told) Reported() (v *Verdict) {
	t.with(func(t *Told) { v = t.verdict })
	return v
}

// firstConflict records a conflict with another policy's object and
// reports whether it is new.
func (t *Told) firstConflict(conflict string) (first bool) {
	t.with(func(t *Told) {
		if first = !t.conflicts.Has(conflict); first {
			if t.conflicts == nil {
				t.conflicts = sets.New[string]()
			}
			t.conflicts.Insert(conflict)
		}
	})
	return first
}

// writtenStatus returns the status last written when the copy of the
// policy at version has not seen it, else nil (and it is forgotten).
func (t *Told) writtenStatus(version string) (status *apiv1.GeneratingPolicyStatus) {
	t.with(func(t *Told) {
		if t.status.status == nil {
			return
		}
		if cluster.Older(version, t.status.version) {
			status = t.status.status
			return
		}
		t.status = writtenStatus{}
	})
	return status
}

// statusWritten keeps the status the write of the policy's status
// returned; one that does not decode is not kept, and the cache is
// compared with.
func (t *Told) statusWritten(out *unstructured.Unstructured) {
	status := &apiv1.GeneratingPolicyStatus{}
	raw, _ := out.Object["status"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, status); err != nil {
		return
	}
	t.with(func(t *Told) { t.status = writtenStatus{version: out.GetResourceVersion(), status: status} })
}

// ForgetStatus drops the status written, of a deleted policy.
func (t *Told) ForgetStatus() { t.with(func(t *Told) { t.status = writtenStatus{} }) }
