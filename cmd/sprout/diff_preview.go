package main

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/sources"
)

// previews holds the policies `sprout diff` plans as if they generated for
// existing triggers: new policies (no PolicyInventory record) without
// generateExisting. Planned as they are they would show nothing, since they
// act only on triggers created or changed from now on; a reader of the diff
// of a new policy wants to see what it generates.
type previews struct {
	recorded map[string]bool // policy references that have a record
	mu       sync.Mutex
	policies map[string]bool // policy references planned as previews
}

// has reports whether the policy (Kind/[namespace/]name) was previewed.
func (p *previews) has(ref string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.policies[ref]
}

// wrap makes src deliver new policies with generateExisting on.
func (p *previews) wrap(src sources.Source) sources.Source {
	return previewSource{Source: src, previews: p}
}

type previewSource struct {
	sources.Source
	previews *previews
}

func (s previewSource) Start(ctx context.Context, h sources.Handler) error {
	return s.Source.Start(ctx, previewHandler{Handler: h, previews: s.previews})
}

type previewHandler struct {
	sources.Handler
	previews *previews
}

func (h previewHandler) Upsert(p sources.Policy) {
	ref := celenv.PolicyRef(p.Policy)
	if h.previews.recorded[ref] || p.PolicySpec().GenerateExisting() {
		h.Handler.Upsert(p)
		return
	}
	var cp apiv1.Policy
	switch pol := p.Policy.(type) {
	case *apiv1.GeneratingPolicy:
		cp = pol.DeepCopy()
	case *apiv1.NamespacedGeneratingPolicy:
		cp = pol.DeepCopy()
	default:
		h.Handler.Upsert(p)
		return
	}
	spec := cp.PolicySpec()
	if spec.EvaluationConfiguration == nil {
		spec.EvaluationConfiguration = &apiv1.EvaluationConfiguration{}
	}
	on := true
	spec.EvaluationConfiguration.GenerateExisting = &apiv1.Toggle{Enabled: &on}
	h.previews.mu.Lock()
	h.previews.policies[ref] = true
	h.previews.mu.Unlock()
	p.Policy = cp
	h.Handler.Upsert(p)
}

// newPreviews reads which policies have a record: the others are new.
func newPreviews(ctx context.Context, cfg *rest.Config) (*previews, error) {
	r, err := newInventoryReader(cfg)
	if err != nil {
		return nil, err
	}
	records, err := r.records(ctx, nil, "")
	if err != nil {
		return nil, err
	}
	pv := &previews{recorded: map[string]bool{}, policies: map[string]bool{}}
	for _, rec := range records {
		pv.recorded[policyID(rec.Spec.Policy)] = true
	}
	return pv, nil
}
