package lib_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/celenv/internal/celtest"
)

func TestUnsupportedLibrariesFailAtCompileTime(t *testing.T) {
	tests := []struct {
		name  string
		exprs []string // variables; the last one is generated
		want  []string // substrings of the compile error
	}{
		{name: "image.GetMetadata", exprs: []string{`image.GetMetadata("nginx:1.21").config.architecture == "amd64"`},
			want: []string{"image.GetMetadata is not supported by Sprout (yet)"}},
		{name: "bare variable", exprs: []string{`[image]`}, want: []string{"image is not supported by Sprout (yet)"}},
		{name: "alias through cel.bind", exprs: []string{`cel.bind(g, image, g.GetMetadata("nginx"))`},
			want: []string{"image.GetMetadata is not supported by Sprout (yet)"}},
		{name: "inside a comprehension", exprs: []string{`["a", "b"].map(u, image.GetMetadata(u))`},
			want: []string{"image.GetMetadata is not supported by Sprout (yet)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := celenv.Compile(celtest.ExprPolicy(tt.exprs...)).Err()
			if err == nil {
				t.Fatal("want a compile error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "undeclared reference") {
				t.Errorf("error %q is the generic undeclared reference", err)
			}
		})
	}
}

func TestUnsupportedNamesStayUsable(t *testing.T) {
	runLibCases(t, time.Time{}, []libCase{
		{name: "a comprehension variable named http", expr: `["a"].map(http, http + "!")`, want: []any{"a!"}},
		{name: "image() next to the image variable", expr: `image("nginx").tag()`, want: "latest"},
		{name: "a field named http", expr: `{"http": 1}.http`, want: int64(1)},
	})
}
