package blast

import "testing"

// A threshold holds what goes beyond it, not what reaches it.
func TestBlastRadiusThreshold(t *testing.T) {
	for _, c := range []struct {
		radius     string
		held, live int
		exceeded   bool
	}{
		{"2", 2, 4, false},
		{"2", 3, 4, true},
		{"0", 1, 100, true},
		{"50%", 2, 4, false},
		{"50%", 3, 4, true},
		{"40%", 4, 8, true},
		{"100%", 4, 4, false},
		{"20%", 1, 0, true},
		{"off", 100, 1, false},
	} {
		b, err := Parse(c.radius)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Exceeded(c.held, c.live); got != c.exceeded {
			t.Errorf("%s: %d of %d exceeded is %v, want %v", c.radius, c.held, c.live, got, c.exceeded)
		}
	}
}
