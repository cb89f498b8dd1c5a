package policyreport

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxConflicts bounds the tries of one write whose report other writers
// keep changing; past it the report is queued again, rate limited.
const maxConflicts = 5

// snapshot is what one write sends: what was held when it began.
type snapshot struct {
	trigger Trigger
	results entries
	changed changes
	version string
	gone    bool
}

// write makes the report of the trigger uid hold the results this writer
// changed, over what the report holds: it creates the report, updates it
// at the resourceVersion last seen, or deletes it, at that version, when
// no result is left. When another writer changed it in between, the
// request fails on the version: the report is read again and the write
// tried again over what it now holds, at most maxConflicts times.
func (w *Writer) write(ctx context.Context, uid types.UID) error {
	var t Trigger
	for range maxConflicts {
		s := w.snapshot(uid)
		if s == nil {
			return nil // nothing left to write, or its trigger is gone
		}
		t = s.trigger
		if err := w.limiter.Wait(ctx); err != nil {
			return err
		}
		version, err := w.send(ctx, s)
		if err == nil {
			w.written(uid, s, version)
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s report: %w", t.Kind, ref(t), err)
		}
		if err := w.refresh(ctx, uid, t); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s %s report: changed by another writer at each of %d tries", t.Kind, ref(t), maxConflicts)
}

// snapshot returns what the report of the trigger uid must hold, or nil
// when nothing changed since it was last written.
func (w *Writer) snapshot(uid types.UID) *snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.triggers[uid]
	if h == nil {
		return nil
	}
	if h.gone {
		if h.version == "" {
			delete(w.triggers, uid) // no report was written
			return nil
		}
		return &snapshot{trigger: h.trigger, version: h.version, gone: true}
	}
	if len(h.changed) == 0 {
		if len(h.results) == 0 {
			delete(w.triggers, uid)
		}
		return nil
	}
	return &snapshot{trigger: h.trigger, results: slices.Clone(h.results), changed: slices.Clone(h.changed), version: h.version}
}

// send writes s, and returns the report's resourceVersion after it: ""
// when it deleted it, or when the trigger's namespace is gone.
func (w *Writer) send(ctx context.Context, s *snapshot) (string, error) {
	t := s.trigger
	client := w.client.Resource(w.opts.API.resourceOf(t)).Namespace(t.Namespace)
	switch {
	case s.gone:
		// The whole report goes, other writers' results too: its trigger
		// is gone.
		err := client.Delete(ctx, string(t.UID), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	case len(s.results) == 0 && s.version == "":
		return "", nil // no report of Sprout's results
	case len(s.results) == 0:
		err := client.Delete(ctx, string(t.UID), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &s.version}})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	case s.version == "":
		u, err := client.Create(ctx, reportObject(w.opts.API, t, s.results), metav1.CreateOptions{FieldManager: FieldManager})
		if namespaceGone(err) || isTerminating(err) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return u.GetResourceVersion(), nil
	}
	report := reportObject(w.opts.API, t, s.results)
	report.SetResourceVersion(s.version)
	u, err := client.Update(ctx, report, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return "", err
	}
	return u.GetResourceVersion(), nil
}

// written notes that the report of the trigger uid holds s, at version:
// the changes s wrote are done, unless a later one came meanwhile.
func (w *Writer) written(uid types.UID, s *snapshot, version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.triggers[uid]
	if h == nil {
		return
	}
	h.version = version
	if h.gone {
		if version == "" {
			delete(w.triggers, uid)
		} else {
			w.queue.Add(uid) // written before its trigger's deletion came: delete it now
		}
		return
	}
	h.changed = h.changed.without(func(c change) bool {
		n, ok := s.changed.of(c.policy)
		return ok && n == c.n
	})
	if len(h.changed) == 0 {
		if len(h.results) == 0 {
			delete(w.triggers, uid)
		}
	}
}

// refresh reads the report of trigger t again, after another writer
// changed it, and merges what it holds.
func (w *Writer) refresh(ctx context.Context, uid types.UID, t Trigger) error {
	client := w.client.Resource(w.opts.API.resourceOf(t)).Namespace(t.Namespace)
	u, err := client.Get(ctx, string(uid), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s report: read again: %w", t.Kind, ref(t), err)
	}
	var server entries
	version := ""
	if err == nil {
		server, version = resultsOf(u), u.GetResourceVersion()
	}
	w.merge(uid, server, version)
	return nil
}

// merge takes, for the trigger uid, the results the report holds at
// version for the policies this writer did not change; a change the
// report already holds is done.
func (w *Writer) merge(uid types.UID, server entries, version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.triggers[uid]
	if h == nil {
		return
	}
	h.version = version
	if h.gone {
		return
	}
	merged := make(entries, 0, len(server)+len(h.changed))
	for _, e := range h.results {
		if h.changed.has(e.policy()) {
			merged = append(merged, e)
		}
	}
	for _, e := range server {
		if !h.changed.has(e.policy()) {
			merged = merged.set(e)
		}
	}
	h.results = merged
	h.changed = h.changed.without(func(c change) bool {
		i, held := h.results.find(c.policy)
		j, onServer := server.find(c.policy)
		if held != onServer {
			return false
		}
		if held {
			if !h.results[i].same(&server[j]) {
				return false
			}
			h.results[i] = server[j]
		}
		return true
	})
}

// namespaceGone reports whether a create failed because the trigger's
// namespace is gone. Any other NotFound, as the API server's "could not
// find the requested resource" for a report CRD it does not serve (yet, or
// any more), is an error: the write is tried again.
func namespaceGone(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces" && d.Group == ""
}

func isTerminating(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsForbidden(err) && errors.As(err, &status) &&
		apierrors.HasStatusCause(err, "NamespaceTerminating")
}

func ref(t Trigger) string {
	if t.Namespace == "" {
		return t.Name
	}
	return t.Namespace + "/" + t.Name
}
