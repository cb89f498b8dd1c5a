package policy

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sprout-gitops/sprout/cluster"
)

// Trigger is one admitted, matching trigger object.
type Trigger struct {
	GVR    schema.GroupVersionResource
	Object *cluster.Object
	// Deleted marks a tombstone: the trigger's last state, replayed once as
	// a DELETE for a policy that lists DELETE.
	Deleted bool
	// Memo is what the policy's evaluations know of Object; nil for a
	// tombstone.
	Memo *Memo
}
