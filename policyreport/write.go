package policyreport

import (
	"context"
	"encoding/json"
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
		if w.opts.Yield != nil {
			w.opts.Yield(ctx)
		}
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
	switch {
	case s.gone:
		// The whole report goes, other writers' results too: its trigger
		// is gone.
		return "", w.delete(ctx, t, nil)
	case len(s.results) == 0 && s.version == "":
		return "", nil // no report of Sprout's results
	case len(s.results) == 0:
		return "", w.delete(ctx, t, &metav1.Preconditions{ResourceVersion: &s.version})
	}
	r := reportOf(w.opts.API, t, s.results)
	r.Metadata.ResourceVersion = s.version
	version, err := w.put(ctx, r, s.version == "")
	if s.version == "" && (namespaceGone(err) || isTerminating(err)) {
		return "", nil
	}
	return version, err
}

// delete deletes the report of trigger t; one already gone is no error.
func (w *Writer) delete(ctx context.Context, t Trigger, pre *metav1.Preconditions) error {
	client := w.client.Resource(w.opts.API.resourceOf(t)).Namespace(t.Namespace)
	err := client.Delete(ctx, string(t.UID), metav1.DeleteOptions{Preconditions: pre})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// metadataOnly asks the API server to answer a write with the report's
// metadata only: Sprout reads nothing else of it.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// put creates report r, or replaces it at the resourceVersion it holds, and
// returns the resourceVersion the write made. It sends JSON it encoded
// itself and reads only the version from the answer: the dynamic client's
// unstructured encoding and decoding of both is most of a write's cost.
func (w *Writer) put(ctx context.Context, r *report, create bool) (string, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	gvr := w.opts.API.resourceOf(Trigger{Namespace: r.Metadata.Namespace})
	req := w.raw.Put()
	if create {
		req = w.raw.Post()
	}
	req = req.AbsPath("/apis", gvr.Group, gvr.Version).
		NamespaceIfScoped(r.Metadata.Namespace, r.Metadata.Namespace != "").
		Resource(gvr.Resource)
	if !create {
		req = req.Name(r.Metadata.Name)
	}
	res := req.Param("fieldManager", FieldManager).
		SetHeader("Content-Type", "application/json").
		SetHeader("Accept", metadataOnly).
		Body(body).
		Do(ctx)
	if err := res.Error(); err != nil {
		return "", err // Error, not Raw, reads the Status of a refusal
	}
	answer, _ := res.Raw()
	var made struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(answer, &made); err != nil {
		return "", fmt.Errorf("read the answer: %w", err)
	}
	return made.Metadata.ResourceVersion, nil
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
	if h := w.triggers[uid]; h != nil {
		w.mergeHeld(h, server, version)
	}
}

// mergeHeld is merge for h, with w.mu held.
func (w *Writer) mergeHeld(h *held, server entries, version string) {
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
