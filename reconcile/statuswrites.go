package reconcile

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/cluster"
)

// statusWrites keeps, per policy, the status its last write returned while
// the running copy of the policy, from the cache, is older: compared with
// the cache alone, a status changed and changed back before the cache saw
// the change (a count up then down) would not be written back, and the
// policy would show the change until its next one.
type statusWrites struct {
	mu sync.Mutex
	m  map[policyKey]writtenStatus
}

type writtenStatus struct {
	version string
	status  *apiv1.GeneratingPolicyStatus
}

// live returns the status of policy as last written, or as policy holds it
// when that copy has seen the write.
func (w *statusWrites) live(policy apiv1.Policy) *apiv1.GeneratingPolicyStatus {
	key := keyOf(policy)
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.m[key]; ok {
		if cluster.Older(policy.GetResourceVersion(), s.version) {
			return s.status
		}
		delete(w.m, key)
	}
	return policy.PolicyStatus()
}

// liveStatus is the newest status of cp's policy Sprout knows: its own
// last write, or the newest copy of the policy it holds. cp may be older
// than that copy: a sync, or a report queued for later, keeps the copy it
// began with while status writes come back to the cache; compared with
// it, a status the server already holds would be written again.
func (c *Controller) liveStatus(cp *compiledPolicy) *apiv1.GeneratingPolicyStatus {
	newest := cp.policy
	c.mu.RLock()
	if cur := c.policies[keyOf(cp.policy)]; cur != nil && cluster.Older(newest.GetResourceVersion(), cur.policy.GetResourceVersion()) {
		newest = cur.policy
	}
	c.mu.RUnlock()
	return c.statusWrites.live(newest)
}

// written keeps the status the write of key's status returned; one that
// does not decode is not kept, and the cache is compared with.
func (w *statusWrites) written(key policyKey, out *unstructured.Unstructured) {
	status := &apiv1.GeneratingPolicyStatus{}
	raw, _ := out.Object["status"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, status); err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[policyKey]writtenStatus{}
	}
	w.m[key] = writtenStatus{version: out.GetResourceVersion(), status: status}
}

// forget drops what was written for a deleted policy.
func (w *statusWrites) forget(key policyKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
