package policy

import (
	"slices"
	"testing"
	"time"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// TestDerived: which triggers each setting admits by creation time; one
// of the policy's own second counts as new and as existing, unless its
// order is known.
func TestDerived(t *testing.T) {
	activated := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	before, same, after := activated.Add(-time.Second), activated, activated.Add(time.Second)
	for _, tt := range []struct {
		name                                       string
		d                                          sproutv1alpha1.DerivedAdmissions
		before, same, after, sameBefore, sameAfter bool
	}{
		{"generateExisting", sproutv1alpha1.DerivedAdmissions{GenerateExisting: true}, true, true, true, true, true},
		{"created", sproutv1alpha1.DerivedAdmissions{Created: true}, false, true, true, false, true},
		{"existing, admission off", sproutv1alpha1.DerivedAdmissions{Existing: true}, true, true, false, true, false},
		{"none", sproutv1alpha1.DerivedAdmissions{}, false, false, false, false, false},
	} {
		got := []bool{Derived(tt.d, before, activated, Unknown), Derived(tt.d, same, activated, Unknown), Derived(tt.d, after, activated, Unknown),
			Derived(tt.d, same, activated, Before), Derived(tt.d, same, activated, After)}
		want := []bool{tt.before, tt.same, tt.after, tt.sameBefore, tt.sameAfter}
		if !slices.Equal(got, want) {
			t.Errorf("%s: before, same second, after, same second before, same second after: %v, want %v", tt.name, got, want)
		}
		// An order outside the activation second changes nothing.
		if Derived(tt.d, before, activated, After) != tt.before || Derived(tt.d, after, activated, Before) != tt.after {
			t.Errorf("%s: an order changed the answer outside the activation second", tt.name)
		}
	}
}

// TestOrderOf: a trigger of the activation second is placed by its
// resourceVersion against the policy's, numerically; nothing is placed
// without the policy's version, outside the second, or by a version that
// is not a number.
func TestOrderOf(t *testing.T) {
	activated := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cp := &Compiled{Activated: activated, ActivatedVersion: "1000"}
	for _, tt := range []struct {
		created time.Time
		rv      string
		want    Order
	}{
		{activated, "999", Before},
		{activated, "99", Before}, // numerically, not as text
		{activated, "1001", After},
		{activated, "10000", After},
		{activated, "1000", After}, // the policy's own write: not before it
		{activated, "x1", Unknown},
		{activated.Add(-time.Second), "5", Unknown},
		{activated.Add(time.Second), "5000", Unknown},
	} {
		if got := cp.OrderOf(tt.created, tt.rv); got != tt.want {
			t.Errorf("created %v at version %s: %v, want %v", tt.created, tt.rv, got, tt.want)
		}
	}
	if got := (&Compiled{Activated: activated}).OrderOf(activated, "5"); got != Unknown {
		t.Errorf("without the policy's version: %v, want Unknown", got)
	}
	// generateExisting admits either way: nothing is placed, nor kept.
	gex := &Compiled{Activated: activated, ActivatedVersion: "1000", Derives: sproutv1alpha1.DerivedAdmissions{GenerateExisting: true}}
	if got := gex.OrderOf(activated, "999"); got != Unknown {
		t.Errorf("under generateExisting: %v, want Unknown", got)
	}
}
