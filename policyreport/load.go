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

// Load reads the reports Sprout wrote before it started, so that the
// results that did not change since are not written again: a restart
// writes no report. Call it before the first Set. Without the report CRDs
// the writer turns off, and says so; so it does when it may not list them.
//
// An answer that may pass, as a fresh CRD's "retry later" while the API
// server builds its cache, is asked again for a while first.
func (w *Writer) Load(ctx context.Context) {
	var err error
	_ = wait.ExponentialBackoffWithContext(ctx, loadBackoff, func(ctx context.Context) (bool, error) {
		err = w.load(ctx)
		return err == nil || !transient(err), nil
	})
	if err != nil {
		w.off.Store(true)
		w.mu.Lock()
		w.triggers = map[types.UID]*held{}
		w.mu.Unlock()
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

// keep holds what report u holds, at its resourceVersion, unless a result
// came first.
func (w *Writer) keep(u *unstructured.Unstructured) {
	scope, _, _ := unstructured.NestedStringMap(u.Object, "scope")
	t := Trigger{APIVersion: scope["apiVersion"], Kind: scope["kind"], Namespace: scope["namespace"], Name: scope["name"], UID: types.UID(scope["uid"])}
	if t.UID == "" || t.Name == "" || string(t.UID) != u.GetName() {
		return // not a report of Sprout's form: rewritten at its trigger's next result
	}
	h := &held{trigger: t, results: resultsOf(u), version: u.GetResourceVersion()}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.triggers[t.UID]; !ok {
		w.triggers[t.UID] = h
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
