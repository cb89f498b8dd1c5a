package policy

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/sets"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/inventory"
)

// Compiled is one generation of a policy, compiled. It is replaced, never
// changed, when the policy changes.
type Compiled struct {
	// Policy is the latest state of the policy (its status changes between
	// compilations); Program was compiled from the same generation.
	Policy   apiv1.Policy
	Source   string
	Revision string
	// Content is a hash of the policy's spec, the revision the
	// blast-radius guard holds and approves; hashed once per compilation,
	// not per sync.
	Content string
	Program *celenv.Program
	// Triggers are the resources the policy's resource rules name, resolved
	// through discovery.
	Triggers []schema.GroupVersionResource
	// Refused are resources the rules name that Sprout or the policy's
	// account may not list and watch: not watched, and waited for.
	Refused []schema.GroupVersionResource
	// ResolveErr says why some resource rules could not be resolved.
	ResolveErr error
	// Activated is when the policy began: triggers created since are admitted.
	Activated time.Time
	// ActivatedVersion is the policy's resourceVersion when it began,
	// where known: it orders the triggers of Activated's second.
	ActivatedVersion string
	Criteria         Criteria
	// Selector is the label selector of its trigger informers
	// (PushedSelector), "" when they hold every object.
	Selector string
	// Operations are the operations the resource rules list.
	Operations sets.Set[string]
	// Admission is whether the policy's events admit triggers: off
	// (evaluation.admission.enabled: false), none does.
	Admission bool
	// Derives are the triggers the policy's settings admit without a
	// record of each.
	Derives sproutv1alpha1.DerivedAdmissions
	// Evaluations are the program's results kept per trigger.
	Evaluations *Evaluations
	// Decisions are the objects apply found unchanged, kept per object.
	Decisions *inventory.Decisions
}

// Order places a trigger created in its policy's activation second
// before or after the policy; Unknown where it cannot be told.
type Order int

const (
	// Unknown: not of the activation second, or no version to tell by.
	Unknown Order = iota
	// Before: the trigger predates the policy.
	Before
	// After: the trigger followed the policy.
	After
)

// OrderOf places a trigger created at created, at resourceVersion rv,
// against the policy: by the versions where it was created in the
// policy's activation second and the policy's version is known (Sprout
// keeps one cluster-wide counter's order: both come from one etcd).
// Unknown otherwise, or where a version is not a number.
func (cp *Compiled) OrderOf(created time.Time, rv string) Order {
	// generateExisting admits either way: nothing to place, or to keep.
	if cp.ActivatedVersion == "" || cp.Derives.GenerateExisting || !created.Equal(cp.Activated) {
		return Unknown
	}
	c, err := resourceversion.CompareResourceVersion(rv, cp.ActivatedVersion)
	switch {
	case err != nil:
		return Unknown
	case c < 0:
		return Before
	default:
		return After
	}
}

// Derived reports whether settings d admit, without a record of it, a
// trigger created at created of a policy activated at activated; order
// places a trigger of the activation second. One of that second whose
// order is Unknown is both new and existing: timestamps have whole
// seconds, and generating once too many beats losing one.
func Derived(d sproutv1alpha1.DerivedAdmissions, created, activated time.Time, order Order) bool {
	switch {
	case d.GenerateExisting:
		return true
	case created.Equal(activated) && order == Before:
		return d.Existing
	case created.Equal(activated) && order == After:
		return d.Created
	}
	return d.Created && !created.Before(activated) || d.Existing && !created.After(activated)
}

// String names the policy and its generation, for logs.
func (cp *Compiled) String() string {
	return fmt.Sprintf("%s (generation %d)", celenv.PolicyRef(cp.Policy), cp.Policy.GetGeneration())
}

// Scope is the namespace a policy's watches are confined to: its own for a
// NamespacedGeneratingPolicy, "" (every namespace) for a GeneratingPolicy.
func (cp *Compiled) Scope() string {
	if cp.Policy.IsNamespaced() {
		return cp.Policy.GetNamespace()
	}
	return ""
}

// Exceptions are what a policy's Evaluations are checked against.
type Exceptions struct {
	List []*celenv.Exception
	// Until is when one of them expires, if one does: the set is made
	// again then.
	Until time.Time
}

// ExceptionList is the list a set holds, nil for none.
func (s *Exceptions) ExceptionList() []*celenv.Exception {
	if s == nil {
		return nil
	}
	return s.List
}
