package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/sources"
)

// planFilter stands between `sprout diff`'s sources and the controller: it
// passes on only the policies named on the command line (every policy when
// none is), remembers which named ones arrived, and keeps the progress line
// up to date with how many were read.
type planFilter struct {
	named    map[string]bool // policy keys (Kind/[namespace/]name); nil keeps every policy
	args     []string        // the POLICY arguments, in order, for errors
	keys     []string        // their keys
	progress *progress
	sources  int // how many sources feed it, to tell when all have synced

	mu     sync.Mutex
	seen   map[string]bool
	synced map[string]bool
}

// newPlanFilter reads diff's POLICY arguments: NAME is a GeneratingPolicy,
// NAMESPACE/NAME a NamespacedGeneratingPolicy, as Kyverno's test files name
// them; the keys diff prints (GeneratingPolicy/NAME,
// NamespacedGeneratingPolicy/NAMESPACE/NAME) are read as they are. No
// namespace is spelled with capitals, so the two never overlap.
func newPlanFilter(args []string, pr *progress) (*planFilter, error) {
	s := &planFilter{progress: pr, seen: map[string]bool{}, synced: map[string]bool{}}
	if len(args) == 0 {
		return s, nil
	}
	s.named = map[string]bool{}
	for _, arg := range args {
		key, err := policyKeyOf(arg)
		if err != nil {
			return nil, err
		}
		if !s.named[key] {
			s.named[key] = true
			s.args, s.keys = append(s.args, arg), append(s.keys, key)
		}
	}
	return s, nil
}

// policyKeyOf reads one POLICY argument as the key of the policy it names.
func policyKeyOf(arg string) (string, error) {
	parts := strings.Split(arg, "/")
	for _, p := range parts {
		if p == "" {
			return "", fmt.Errorf("policy %q: want NAME, NAMESPACE/NAME or the Kind/[namespace/]name diff prints", arg)
		}
	}
	switch {
	case len(parts) == 1:
		return apiv1.GeneratingPolicyKind + "/" + arg, nil
	case len(parts) == 2 && parts[0] == apiv1.GeneratingPolicyKind:
		return arg, nil
	case len(parts) == 3 && parts[0] == apiv1.NamespacedGeneratingPolicyKind:
		return arg, nil
	case len(parts) == 2 && parts[0] != apiv1.NamespacedGeneratingPolicyKind:
		return apiv1.NamespacedGeneratingPolicyKind + "/" + arg, nil
	}
	return "", fmt.Errorf("policy %q: want NAME, NAMESPACE/NAME, GeneratingPolicy/NAME or NamespacedGeneratingPolicy/NAMESPACE/NAME", arg)
}

// keep reports whether the policy is one to plan, and counts it when it is.
func (s *planFilter) keep(key string) bool {
	if s.named != nil && !s.named[key] {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.seen[key] {
		s.seen[key] = true
		s.progress.set("diff: reading policies: %d", len(s.seen))
	}
	return true
}

// sourceSynced notes that a source has handed over what it held: once all
// have, the controller plans.
func (s *planFilter) sourceSynced(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced[name] {
		return
	}
	s.synced[name] = true
	if len(s.synced) == s.sources {
		s.progress.show("diff: planning %s", plural(len(s.seen), "policy", "policies"))
	}
}

// missing returns an error naming the policies asked for that no source
// delivered, or nil.
func (s *planFilter) missing(srcs []sources.Source) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for i, key := range s.keys {
		if s.seen[key] {
			continue
		}
		if s.args[i] == key {
			gone = append(gone, key)
		} else {
			gone = append(gone, fmt.Sprintf("%s (%s)", s.args[i], key))
		}
	}
	if len(gone) == 0 {
		return nil
	}
	names := make([]string, 0, len(srcs))
	for _, src := range srcs {
		names = append(names, src.Name())
	}
	return fmt.Errorf("%s: no such policy in %s", strings.Join(gone, ", "), strings.Join(names, ", "))
}

// wrap makes src deliver only the selected policies.
func (s *planFilter) wrap(src sources.Source) sources.Source {
	s.sources++
	return selectedSource{Source: src, sel: s}
}

type selectedSource struct {
	sources.Source
	sel *planFilter
}

func (s selectedSource) Start(ctx context.Context, h sources.Handler) error {
	return s.Source.Start(ctx, selectedHandler{Handler: h, sel: s.sel})
}

func (s selectedSource) HasSynced() bool {
	ok := s.Source.HasSynced()
	if ok {
		s.sel.sourceSynced(s.Name())
	}
	return ok
}

type selectedHandler struct {
	sources.Handler
	sel *planFilter
}

func (h selectedHandler) Upsert(p sources.Policy) {
	if h.sel.keep(celenv.PolicyRef(p.Policy)) {
		h.Handler.Upsert(p)
	}
}

func (h selectedHandler) Delete(p sources.Policy) {
	if h.sel.named == nil || h.sel.named[celenv.PolicyRef(p.Policy)] {
		h.Handler.Delete(p)
	}
}
