package sources

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestObjectName(t *testing.T) {
	names := []string{
		"cluster",
		"git:https://github.com/example/platform",
		"git:https://github.com/example/Platform",
		"git:ssh://git@github.com:22/" + strings.Repeat("very-long-path/", 20),
		"dir:/srv/policies",
		"dir:./policies/",
		"dir:---",
	}
	seen := map[string]string{}
	for _, n := range names {
		got := ObjectName(n)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("%q → %q is not a valid object name: %v", n, got, errs)
		}
		if again := ObjectName(n); again != got {
			t.Errorf("%q → %q, then %q", n, got, again)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q both → %q", n, other, got)
		}
		seen[got] = n
	}
	if got := ObjectName("git:https://github.com/example/platform"); !strings.HasPrefix(got, "git-https-github-com-example-platform-") {
		t.Errorf("the name does not read like its source: %q", got)
	}
}
