package lib_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/celenv/internal/celtest"
)

// libCase is one expression of a utility library and what it must give: a
// JSON value (as generator.Apply writes it into an object), or an error.
type libCase struct {
	name    string
	expr    string
	want    any    // when wantErr is empty
	wantErr string // substring of the compile or evaluation error
}

// evalLib compiles expr as the only variable of a policy and evaluates it at
// now (zero: the wall clock), returning the value the policy generated.
func evalLib(t *testing.T, expr string, now time.Time) (any, error) {
	t.Helper()
	prog := celenv.Compile(celtest.ExprPolicy(expr))
	if err := prog.Err(); err != nil {
		return nil, err
	}
	res, err := prog.Evaluate(context.Background(), celenv.Input{
		Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}},
		Now:    now,
	})
	if err != nil {
		return nil, err
	}
	if len(res.Objects) != 1 {
		t.Fatalf("want one generated object, got %d", len(res.Objects))
	}
	return res.Objects[0].Object.Object["data"].(map[string]any)["value"], nil
}

// runLibCases evaluates each case at now and checks its value or error.
func runLibCases(t *testing.T, now time.Time, cases []libCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := evalLib(t, tc.expr, now)
			switch {
			case tc.wantErr != "" && err == nil:
				t.Fatalf("want an error containing %q, got value %#v", tc.wantErr, got)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want %#v, got error %v", tc.want, err)
			case tc.wantErr == "":
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", tc.expr, diff)
				}
			}
		})
	}
}
