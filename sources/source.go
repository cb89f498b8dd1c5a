package sources

import (
	"context"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
)

// Policy is one policy as a source hands it over.
type Policy struct {
	apiv1.Policy
	// Source names where the policy came from, such as "cluster".
	Source string
	// Revision is the source's version of the policy: its generation for the
	// cluster, a commit for Git.
	Revision string
	// Program is the policy compiled, once, by the source it entered
	// through; a compile error is on it.
	Program *celenv.Program
	// CreatedVersion is the resourceVersion the policy was created at,
	// where the source can tell that this copy is its creation's: empty
	// when it cannot. It orders the triggers created in the policy's
	// creation second, which timestamps cannot.
	CreatedVersion string
}

// Handler receives the policies of a source.
type Handler interface {
	// Upsert is called for a new policy and for every change to one,
	// including changes to its status, with its Program.
	Upsert(p Policy)
	// Delete is called when a policy is gone from its source.
	Delete(p Policy)
	// Release is called when a policy leaves the source's selection (its
	// labels changed) but not the source: it is another shard's now, its
	// objects and record are left to it.
	Release(p Policy)
	// Invalid is called for a policy the source holds but cannot decode.
	Invalid(source, name string, err error)
	// SourceChecked is called after every check of a polled source with
	// what it found; when st.Err is set the revision was not taken and the
	// policies of the last good one keep running.
	SourceChecked(source string, st Status)
	// SourceComplete is called when a source that started without a whole
	// revision (a remote that was down) delivers its first one.
	SourceComplete(source string)
}

// Source feeds policies to a Handler.
type Source interface {
	// Name names the source in records and logs: "cluster", "dir:<path>",
	// "git:<name>".
	Name() string
	// Start begins delivering policies to h until ctx ends.
	Start(ctx context.Context, h Handler) error
	// HasSynced reports whether the source has tried to deliver what it
	// held at Start.
	HasSynced() bool
	// Complete reports whether the source has delivered a whole revision:
	// only then does a policy missing from it count as deleted.
	Complete() bool
	// Spec describes the source as configured, for its PolicySource.
	Spec() sproutv1alpha1.PolicySourceSpec
	// Wait returns once the source has stopped after Start's context
	// ended, leaving nothing behind (no temporary clone).
	Wait()
}
