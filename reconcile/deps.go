package reconcile

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/access"
	"github.com/sprout-gitops/sprout/reconcile/evaluate"
	"github.com/sprout-gitops/sprout/reconcile/policy"
	"github.com/sprout-gitops/sprout/reconcile/queue"
	"github.com/sprout-gitops/sprout/reconcile/watches"
)

// queueReaders queues, for an event on an object of gvr that the policy's
// evaluations read, the triggers whose last evaluation read it. It reports
// false when the policy must be queued in full instead.
func (in *intake) queueReaders(key policy.Key, gvr schema.GroupVersionResource, o, old *cluster.Object) bool {
	readers, full := in.reads.Covered(key, watches.ReadEvent{GVR: gvr, Obj: o, Old: old})
	if full {
		return false
	}
	in.markReaders(key, readers)
	return true
}

// markReaders queues the policy for the triggers that read what changed.
// Their own objects did not change, so only their key is given: their
// evaluation, which read another object, was not kept.
func (in *intake) markReaders(key policy.Key, readers []watches.TriggerReads) {
	for _, tr := range readers {
		in.queue.AddTrigger(key, tr.UID, queue.Change{GVR: tr.GVR, Key: tr.Key}, 0)
	}
}

// endReads ends what the sync of run began in the read index (ok: it was
// clean and its reads are to be kept), and queues what changed meanwhile.
func (in *intake) endReads(run *syncRun, ok bool, dirty []types.UID, evaluated []watches.TriggerReads) {
	readers, full := in.reads.End(run.key, ok, !run.incremental, dirty, evaluated)
	if full {
		in.queue.Add(run.key)
		return
	}
	in.markReaders(run.key, readers)
}

// entryChanged queues every policy whose syncs read the
// GlobalContextEntry.
func (in *intake) entryChanged(name string) {
	in.states.Each(func(key policy.Key, st *policyState) {
		if st.ReadsEntry(name) {
			in.queue.Add(key)
		}
	})
}

// readerFor is the reader of the evaluations of run's sync, for a policy
// that runs as as (nil: as Sprout). A resource it reads is at once among
// those whose changes queue the policy.
func (in *intake) readerFor(run *syncRun, as *access.Account) *evaluate.Reader {
	s := evaluate.Sync{Scope: run.cp.Scope(), Exceptions: in.states.Of(run.key).Exceptions(),
		Read: func(gvr schema.GroupVersionResource) { in.states.Of(run.key).SetReads(sets.New(gvr), nil, true) }}
	if as != nil {
		s.May = func(ctx context.Context, verb string, gvr schema.GroupVersionResource, namespace string) error {
			return in.rights.Reviews().May(ctx, as, verb, gvr, namespace)
		}
	}
	return in.eval.Reader(s)
}
