package policyreport

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// loadPage is how many reports one list reads.
const loadPage = 500

// loadWritten reads the reports Sprout wrote before it started, so that
// the results that did not change since are not written again: a restart
// writes no report. Run calls it first, once Options.Yield lets it: after
// the first syncs, not before them, so that a start's first objects do not
// wait on a list of every report. What the syncs set meanwhile is held over
// the report the load finds (keep). Without the report CRDs the writer
// turns off, and says so; so it does when it may not list them.
//
// An answer that may pass, as a fresh CRD's "retry later" while the API
// server builds its cache, is asked again for a while first.
func (w *Writer) loadWritten(ctx context.Context) {
	if w.opts.Yield != nil {
		w.opts.Yield(ctx)
	}
	var err error
	_ = wait.ExponentialBackoffWithContext(ctx, loadBackoff, func(ctx context.Context) (bool, error) {
		err = w.load(ctx)
		return err == nil || !transient(err), nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.loaded, w.retains = true, nil
	if err != nil {
		w.off.Store(true)
		w.triggers = map[types.UID]*held{}
		w.log.Info("PolicyReports not written", "reason", err.Error())
	}
}

// loadBackoff spaces Load's tries over about half a minute.
var loadBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Steps: 8, Cap: 8 * time.Second}

// transient reports whether a list may succeed when asked again.
func transient(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsInternalError(err)
}

func (w *Writer) load(ctx context.Context) error {
	namespaced, cluster := w.opts.API.resources()
	for _, gvr := range []schema.GroupVersionResource{namespaced, cluster} {
		opts := metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy, Limit: loadPage}
		for {
			list, err := w.client.Resource(gvr).List(ctx, opts)
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return fmt.Errorf("%s: the report CRDs are not installed", gvr.GroupResource())
			}
			if err != nil {
				return fmt.Errorf("%s: list: %w", gvr.GroupResource(), err)
			}
			for i := range list.Items {
				w.keep(&list.Items[i])
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return nil
}

// keep holds what report u holds, at its resourceVersion. A change made
// before the load is merged over it, as over a report another writer
// changed, and one the report holds already is done; a Retain made before
// the load takes the results of the triggers it does not keep away.
func (w *Writer) keep(u *unstructured.Unstructured) {
	scope, _, _ := unstructured.NestedStringMap(u.Object, "scope")
	t := Trigger{APIVersion: scope["apiVersion"], Kind: scope["kind"], Namespace: scope["namespace"], Name: scope["name"], UID: types.UID(scope["uid"])}
	if t.UID == "" || t.Name == "" || string(t.UID) != u.GetName() {
		return // not a report of Sprout's form: rewritten at its trigger's next result
	}
	server := resultsOf(u)
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.triggers[t.UID]
	if h == nil {
		h = &held{}
		w.triggers[t.UID] = h
	}
	h.trigger = t
	w.mergeHeld(h, server, u.GetResourceVersion())
	for _, r := range w.retains {
		if _, has := h.results.find(r.policy); has && !h.gone && !h.changed.has(r.policy) && !r.keep(t.UID) {
			w.unset(h, r.policy)
		}
	}
}

// resultsOf reads the results of report u.
func resultsOf(u *unstructured.Unstructured) entries {
	items, _, _ := unstructured.NestedSlice(u.Object, "results")
	var out entries
	for _, item := range items {
		if r, ok := item.(map[string]any); ok {
			out = out.set(resultOf(r))
		}
	}
	return out
}

// resultOf reads a result as resultObject wrote it.
func resultOf(o map[string]any) entry {
	str := func(k string) string { s, _ := o[k].(string); return s }
	r := &Result{Policy: str("policy"), Rule: str("rule"), Result: str("result"), Message: str("message"),
		Category: str("category"), Severity: str("severity")}
	r.Scored, _ = o["scored"].(bool)
	if props, ok := o["properties"].(map[string]any); ok {
		r.Properties = make(map[string]string, len(props))
		for k, v := range props {
			r.Properties[k], _ = v.(string)
		}
	}
	seconds, _, _ := unstructured.NestedInt64(o, "timestamp", "seconds")
	return entryOf(r, seconds)
}
