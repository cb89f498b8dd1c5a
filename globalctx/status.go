package globalctx

import (
	"context"
	"log/slog"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
)

// statusWriter writes an entry's status as Kyverno shapes it: the Ready
// condition (Succeeded, or Failed with the reason) and, after each call
// that succeeded, lastRefreshTime.
type statusWriter struct {
	client  dynamic.Interface
	enabled bool
	log     *slog.Logger
}

// ready writes Ready for the entry's load: True when err is nil.
func (w *statusWriter) ready(ctx context.Context, name string, err error) {
	w.update(ctx, name, func(st *v2beta1.GlobalContextEntryStatus, generation int64) {
		setReady(st, generation, err)
	})
}

// refreshed writes lastRefreshTime, and Ready True, after a call.
func (w *statusWriter) refreshed(ctx context.Context, name string) {
	w.update(ctx, name, func(st *v2beta1.GlobalContextEntryStatus, generation int64) {
		setReady(st, generation, nil)
		st.LastRefreshTime = metav1.Now()
	})
}

func setReady(st *v2beta1.GlobalContextEntryStatus, generation int64, err error) {
	c := metav1.Condition{Type: v2beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: v2beta1.ReasonSucceeded,
		Message: "the data is loaded", ObservedGeneration: generation}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v2beta1.ReasonFailed, err.Error()
	}
	st.Ready = nil
	meta.SetStatusCondition(&st.Conditions, c)
}

// update applies change to the entry's status and writes it when it
// differs; a write that fails is logged: the next load writes again.
func (w *statusWriter) update(ctx context.Context, name string, change func(*v2beta1.GlobalContextEntryStatus, int64)) {
	if !w.enabled || ctx == nil {
		return
	}
	entries := w.client.Resource(v2beta1.Resource)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := entries.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var st v2beta1.GlobalContextEntryStatus
		if raw, ok := u.Object["status"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st); err != nil {
				return err
			}
		}
		before := st.DeepCopy()
		change(&st, u.GetGeneration())
		if equalStatus(before, &st) {
			return nil
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
		if err != nil {
			return err
		}
		u.Object["status"] = raw
		_, err = entries.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil && ctx.Err() == nil {
		w.log.Warn("cannot write the status of a GlobalContextEntry", "entry", name, "error", err.Error())
	}
}

// equalStatus compares what Sprout writes, ignoring when a condition last
// changed, which SetStatusCondition keeps when nothing else did.
func equalStatus(a, b *v2beta1.GlobalContextEntryStatus) bool {
	if !a.LastRefreshTime.Equal(&b.LastRefreshTime) || len(a.Conditions) != len(b.Conditions) || (a.Ready == nil) != (b.Ready == nil) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
