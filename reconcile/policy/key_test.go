package policy

import "testing"

func TestKeyRoundTrips(t *testing.T) {
	for _, k := range []Key{
		{Kind: "GeneratingPolicy", Name: "a"},
		{Kind: "NamespacedGeneratingPolicy", Namespace: "team", Name: "b"},
	} {
		got, ok := ParseKey(k.String())
		if !ok || got != k {
			t.Errorf("ParseKey(%q) = %v, %v; want %v", k.String(), got, ok, k)
		}
	}
	for _, s := range []string{"", "GeneratingPolicy", "NamespacedGeneratingPolicy/a", "Pod/ns/a", "GeneratingPolicy/ns/a"} {
		if _, ok := ParseKey(s); ok {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
}
