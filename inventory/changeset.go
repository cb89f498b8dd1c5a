package inventory

import (
	"log/slog"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// Action is what a write did to one object.
type Action string

// The closed set of actions.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Deleted    Action = "deleted"
	// Skipped objects were not written on purpose: not Sprout's to write, or
	// already present for a policy that does not synchronize.
	Skipped Action = "skipped"
	// Failed objects could not be written; Reason says why.
	Failed Action = "failed"
)

// Change is the outcome for one object.
type Change struct {
	// ID names the object as Kind/namespace/name (Kind/name when cluster-scoped).
	ID     string
	Action Action
	// Reason explains a skipped or failed object.
	Reason string
	// TriggerUID is the object's trigger, from its labels.
	TriggerUID string
	// Owner is, for an object skipped because another of Sprout's policies
	// generated it, that policy (Kind/[namespace/]name).
	Owner string
	// ResourceVersion is, for an object configured, the version the write
	// made; for one created, the version the create made when the object
	// made holds every desired field, "" otherwise.
	ResourceVersion string
	// Before and After are set by a dry run (DryRun): the object as it is
	// and as it would be; nil for one that does not exist on that side.
	// Secret values are masked.
	Before, After *unstructured.Unstructured
}

// Present reports whether the object was left alone because it already
// existed for a policy that does not synchronize.
func (c Change) Present() bool { return c.Action == Skipped && c.Reason == reasonPresent }

// ChangeSet holds one Change per object handed to a write, even on failure.
type ChangeSet struct {
	Changes []Change
}

func (c *ChangeSet) add(obj *unstructured.Unstructured, action Action, reason string) {
	c.Changes = append(c.Changes, changeOf(obj, action, reason))
}

// failAll fails every object with the same reason.
func (c *ChangeSet) failAll(objs []*unstructured.Unstructured, reason string) {
	for _, obj := range objs {
		c.add(obj, Failed, reason)
	}
}

func changeOf(obj *unstructured.Unstructured, action Action, reason string) Change {
	return Change{ID: ObjectID(obj), Action: action, Reason: reason, TriggerUID: metadataStrings(obj, "labels").get(sproutv1alpha1.LabelTriggerUID)}
}

// loggedObjects is how many written objects a log line names.
const loggedObjects = 10

// LogValue summarises the writes for a log line: how many objects were
// created, configured and deleted, and the first few of them by name, so
// that a sync of 10,000 objects is one short line.
func (c ChangeSet) LogValue() slog.Value {
	var attrs []slog.Attr
	for _, a := range []Action{Created, Configured, Deleted} {
		if n := c.Count(a); n > 0 {
			attrs = append(attrs, slog.Int(string(a), n))
		}
	}
	var named []string
	for _, ch := range c.Changes {
		if len(named) == loggedObjects {
			named = append(named, "...")
			break
		}
		if ch.Action == Created || ch.Action == Configured || ch.Action == Deleted {
			named = append(named, ch.ID+":"+string(ch.Action))
		}
	}
	return slog.GroupValue(append(attrs, slog.Any("objects", named))...)
}

// Written reports whether any object was created, configured or deleted.
func (c ChangeSet) Written() bool {
	return slices.ContainsFunc(c.Changes, func(ch Change) bool {
		return ch.Action == Created || ch.Action == Configured || ch.Action == Deleted
	})
}

// Changed reports whether an existing object was configured or deleted:
// more than the creates that every new trigger's sync makes.
func (c ChangeSet) Changed() bool {
	return slices.ContainsFunc(c.Changes, func(ch Change) bool {
		return ch.Action == Configured || ch.Action == Deleted
	})
}

// Count returns how many objects got action a.
func (c ChangeSet) Count(a Action) int {
	n := 0
	for _, ch := range c.Changes {
		if ch.Action == a {
			n++
		}
	}
	return n
}

// NotOwned describes the objects skipped because someone else owns them,
// or "" when there are none.
func (c ChangeSet) NotOwned() string {
	var out []string
	for _, ch := range c.Changes {
		if ch.Action == Skipped && ch.Reason != reasonPresent && ch.Reason != reasonReplaced {
			out = append(out, ch.ID+" ("+ch.Reason+")")
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// ObjectID names an object as Kind/namespace/name, or Kind/name.
func ObjectID(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return obj.GetKind() + "/" + ns + "/" + obj.GetName()
	}
	return obj.GetKind() + "/" + obj.GetName()
}
