package inventory

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the field manager of every write Sprout makes.
const FieldManager = "sprout"

// Applier writes desired objects with server-side apply.
type Applier struct {
	manager *ssa.ResourceManager
}

// NewApplier returns an Applier writing through cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("inventory: client: %w", err)
	}
	return &Applier{manager: ssa.NewResourceManager(c, nil, ssa.Owner{Field: FieldManager, Group: "sprout.dev"})}, nil
}

// ApplyOptions say how desired objects are written.
type ApplyOptions struct {
	// Force takes ownership of conflicting fields: a synchronizing policy
	// reverts edits made by others to the fields it sets.
	Force bool
}

// Apply writes every object and returns one entry per object. Unchanged
// objects are not written.
func (a *Applier) Apply(ctx context.Context, objects []*unstructured.Unstructured, opts ApplyOptions) (*ssa.ChangeSet, error) {
	o := ssa.DefaultApplyOptions()
	o.Force = opts.Force
	return a.manager.ApplyAll(ctx, objects, o)
}
