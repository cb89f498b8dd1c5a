// Package example holds one test for each way a test can depend on the
// policy CRDs, each through a helper, and one that does not: the input of
// TestTestsThatReadPolicyStatusRunUnderBothCRDSets. It is parsed, not built.
package example

import "testing"

func TestReadsAStatusField(t *testing.T) { objectsOf(t, "p") }

func objectsOf(t *testing.T, name string) int {
	n, _, _ := unstructured.NestedInt64(get(t, name).Object, "status", "objects")
	return int(n)
}

func TestReadsADecodedStatus(t *testing.T) { checker{t}.ready("p") }

type checker struct{ t *testing.T }

func (c checker) ready(name string) bool { return decode(c.t, name).PolicyStatus().Ready }

func TestReadsTheColumns(t *testing.T) { printed(t, "/apis/policies.kyverno.io/v1/generatingpolicies") }

var printed = func(t *testing.T, path string) []byte {
	return get(t, path, "application/json;as=Table;v=v1;g=meta.k8s.io")
}

func TestAsksWhichSetRuns(t *testing.T) {
	if kyvernoCRDs(t) {
		t.Skip()
	}
}

func TestGeneratesOnly(t *testing.T) {
	apply(t, "p")
	waitFor(t, "p-out")
}
