package reconcile

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// writtenStatus is the status a write of the policy's status returned,
// kept until the cache holds a copy of the policy that has seen it: the
// running copy of the policy, from the cache, may be older, and compared
// with the cache alone, a status changed and changed back before the cache
// saw the change (a count up then down) would not be written back.
type writtenStatus struct {
	version string
	status  *apiv1.GeneratingPolicyStatus
}

// liveStatus is the newest status of cp's policy Sprout knows: its own
// last write, or the newest copy of the policy it holds. cp may be older
// than that copy: a sync, or a report queued for later, keeps the copy it
// began with while status writes come back to the cache; compared with
// it, a status the server already holds would be written again.
func (c *Controller) liveStatus(cp *policy.Compiled) *apiv1.GeneratingPolicyStatus {
	newest := cp.Policy
	c.mu.RLock()
	if cur := c.policies[policy.KeyOf(cp.Policy)]; cur != nil && cluster.Older(newest.GetResourceVersion(), cur.Policy.GetResourceVersion()) {
		newest = cur.Policy
	}
	c.mu.RUnlock()
	written := c.states.of(policy.KeyOf(newest)).writtenStatus(newest.GetResourceVersion())
	if written != nil {
		return written
	}
	return newest.PolicyStatus()
}

// writtenStatus returns the status last written when the copy of the
// policy at version has not seen it, else nil (and it is forgotten).
func (st *policyState) writtenStatus(version string) (status *apiv1.GeneratingPolicyStatus) {
	st.with(func(st *policyState) {
		if st.status.status == nil {
			return
		}
		if cluster.Older(version, st.status.version) {
			status = st.status.status
			return
		}
		st.status = writtenStatus{}
	})
	return status
}

// statusWritten keeps the status the write of the policy's status
// returned; one that does not decode is not kept, and the cache is
// compared with.
func (st *policyState) statusWritten(out *unstructured.Unstructured) {
	status := &apiv1.GeneratingPolicyStatus{}
	raw, _ := out.Object["status"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, status); err != nil {
		return
	}
	st.with(func(st *policyState) { st.status = writtenStatus{version: out.GetResourceVersion(), status: status} })
}

// forgetStatus drops the status written, of a deleted policy.
func (st *policyState) forgetStatus() { st.with(func(st *policyState) { st.status = writtenStatus{} }) }
