package sources

import (
	"context"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// Policy is one policy as a source hands it over.
type Policy struct {
	apiv1.Policy
	// Source names where the policy came from, such as "cluster".
	Source string
	// Revision is the source's version of the policy: its generation for the
	// cluster, a commit for Git.
	Revision string
}

// Handler receives the policies of a source.
type Handler interface {
	// Upsert is called for a new policy and for every change to one,
	// including changes to its status.
	Upsert(p Policy)
	// Delete is called when a policy is gone from its source.
	Delete(p Policy)
	// Invalid is called for a policy the source holds but cannot decode.
	Invalid(source, name string, err error)
}

// Source feeds policies to a Handler.
type Source interface {
	// Start begins delivering policies to h until ctx ends.
	Start(ctx context.Context, h Handler) error
	// HasSynced reports whether every policy that existed at Start has been
	// delivered.
	HasSynced() bool
}
