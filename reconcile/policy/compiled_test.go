package policy

import (
	"testing"
	"time"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// TestDerived: which triggers each setting admits by creation time; one
// of the policy's own second counts as new and as existing.
func TestDerived(t *testing.T) {
	activated := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	before, same, after := activated.Add(-time.Second), activated, activated.Add(time.Second)
	for _, tt := range []struct {
		name                string
		d                   sproutv1alpha1.DerivedAdmissions
		before, same, after bool
	}{
		{"generateExisting", sproutv1alpha1.DerivedAdmissions{GenerateExisting: true}, true, true, true},
		{"created", sproutv1alpha1.DerivedAdmissions{Created: true}, false, true, true},
		{"existing, admission off", sproutv1alpha1.DerivedAdmissions{Existing: true}, true, true, false},
		{"none", sproutv1alpha1.DerivedAdmissions{}, false, false, false},
	} {
		got := []bool{Derived(tt.d, before, activated), Derived(tt.d, same, activated), Derived(tt.d, after, activated)}
		if got[0] != tt.before || got[1] != tt.same || got[2] != tt.after {
			t.Errorf("%s: before, same second, after: %v, want %v %v %v", tt.name, got, tt.before, tt.same, tt.after)
		}
	}
}
