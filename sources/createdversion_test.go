package sources

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
)

// A copy of a policy is vouched for as its creation's only while nothing
// but its metadata can have been written: generation 1 and no status.
func TestCreatedVersion(t *testing.T) {
	fresh := func() *apiv1.GeneratingPolicy {
		return &apiv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, ResourceVersion: "42"}}
	}
	if got := createdVersion(fresh()); got != "42" {
		t.Errorf("a fresh policy: %q, want its version", got)
	}
	edited := fresh()
	edited.Generation = 2
	withStatus := fresh()
	withStatus.Status.ObservedGeneration = 1
	for name, p := range map[string]*apiv1.GeneratingPolicy{"a spec write": edited, "a status": withStatus} {
		if got := createdVersion(p); got != "" {
			t.Errorf("after %s: %q, want none", name, got)
		}
	}
}
