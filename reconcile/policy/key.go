// Package policy is the vocabulary the reconcile core and its parts share
// about one policy: the key it is queued and kept under (Key), a compiled
// generation of it (Compiled), the triggers a sync admitted (Trigger), and
// what a generation's evaluations keep per cached trigger object
// (Evaluations). A Compiled is replaced, never changed, so every part may
// read one without a lock; its Evaluations are the policy's sync's alone.
package policy

import (
	"strings"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// Key names one policy: the work-queue key it is synced under, and what
// every part keeps its state of the policy under.
type Key struct {
	Kind      string
	Namespace string
	Name      string
}

// String is Kind/name or Kind/namespace/name, the form ParseKey reads and
// the sprout.dev/policy annotation holds.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// ReportName is how PolicyReports' results name the policy: name, or
// namespace/name.
func (k Key) ReportName() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// KeyOf is the key of p.
func KeyOf(p apiv1.Policy) Key {
	if p.IsNamespaced() {
		return Key{Kind: apiv1.NamespacedGeneratingPolicyKind, Namespace: p.GetNamespace(), Name: p.GetName()}
	}
	return Key{Kind: apiv1.GeneratingPolicyKind, Name: p.GetName()}
}

// ParseKey reads Kind/name or Kind/namespace/name.
func ParseKey(s string) (Key, bool) {
	parts := strings.Split(s, "/")
	switch {
	case len(parts) == 2 && parts[0] == apiv1.GeneratingPolicyKind:
		return Key{Kind: parts[0], Name: parts[1]}, true
	case len(parts) == 3 && parts[0] == apiv1.NamespacedGeneratingPolicyKind:
		return Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, true
	}
	return Key{}, false
}
