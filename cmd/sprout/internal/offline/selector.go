package offline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sprout-gitops/sprout/globalctx"
)

// Selector picks the results of a kyverno-test.yaml to run, as kyverno
// test's --test-case-selector does: by policy, rule and resource, each a
// wildcard (* any run of characters, ? any one). A result that does not
// name a rule (or a policy, or resources) is not filtered by it, and a
// result runs whole when one of its resources matches. The zero Selector
// runs every result.
type Selector struct {
	policy, rule, resource []string
}

// ParseSelector reads kyverno test's selector syntax: key=value pairs,
// separated by commas, where the key is policy, rule or resource; a key
// given twice must match both values.
func ParseSelector(in string) (Selector, error) {
	var s Selector
	if strings.TrimSpace(in) == "" {
		return s, nil
	}
	for _, part := range strings.Split(in, ",") {
		key, value, ok := strings.Cut(part, "=")
		if !ok || strings.Contains(value, "=") {
			return s, fmt.Errorf("%q is not key=value (policy=…, rule=…, resource=…)", strings.TrimSpace(part))
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "policy":
			s.policy = append(s.policy, value)
		case "rule":
			s.rule = append(s.rule, value)
		case "resource":
			s.resource = append(s.resource, value)
		default:
			return s, fmt.Errorf("%q: the key is policy, rule or resource, not %q", strings.TrimSpace(part), strings.TrimSpace(key))
		}
	}
	return s, nil
}

// selects reports whether the result r is to run.
func (s Selector) selects(r kyvernoResult) bool {
	var names []string
	for _, n := range resourcesOf(r) {
		names = append(names, n.name)
	}
	for _, p := range s.policy {
		if r.Policy != "" && !globalctx.WildcardMatch(p, r.Policy) {
			return false
		}
	}
	for _, p := range s.rule {
		if r.Rule != "" && !globalctx.WildcardMatch(p, r.Rule) {
			return false
		}
	}
	for _, p := range s.resource {
		if len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return globalctx.WildcardMatch(p, n) }) {
			return false
		}
	}
	return true
}
