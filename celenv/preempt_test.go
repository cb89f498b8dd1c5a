package celenv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// nested returns variables name0 … name<n>, each made of two references to
// the one before (wrap, with %[1]s for the reference): a few short
// variables that stand for a value of 2^n leaves, all shared.
func nested(name, leaf, wrap string, n int) []string {
	vars := []string{name + "0", leaf}
	for i := 1; i <= n; i++ {
		vars = append(vars, fmt.Sprintf("%s%d", name, i), fmt.Sprintf(wrap, fmt.Sprintf("variables.%s%d", name, i-1)))
	}
	return vars
}

// stopsWithin evaluates policy, which must compile, with a time limit of
// limit, and wants it to fail within twice the limit with an error that
// says why it stopped: the time limit, or the evaluation's cost budget
// when the walk spent it first. It gives up waiting at ten times the
// limit: the evaluation then runs on in the background.
func stopsWithin(t *testing.T, policy apiv1.Policy, limit time.Duration) {
	t.Helper()
	p := celenv.Compile(policy)
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	trigger := object("v1", "ConfigMap", "team", "cm")
	type outcome struct {
		err  error
		took time.Duration
	}
	done := make(chan outcome, 1)
	go func() {
		start := time.Now()
		_, err := p.Evaluate(context.Background(), celenv.Input{Object: trigger.Object, Timeout: limit})
		done <- outcome{err, time.Since(start)}
	}()
	// Unpreempted, these walks take hours; the slack is for a machine
	// busy with make test's other jobs, where 1 s passed once.
	const slack = 2 * time.Second
	var got outcome
	select {
	case got = <-done:
	case <-time.After(limit + 10*slack):
		t.Fatalf("the evaluation still runs %v after it started; its time limit is %v", limit+10*slack, limit)
	}
	timeLimit := fmt.Sprintf("evaluation took longer than its time limit of %v", limit)
	budget := fmt.Sprintf("cost more than their limit of %d together", celenv.PerEvaluationCostLimit)
	if got.err == nil || !strings.Contains(got.err.Error(), timeLimit) && !strings.Contains(got.err.Error(), budget) {
		t.Fatalf("want an error saying %q or %q, got %.300v", timeLimit, budget, got.err)
	}
	if got.took > limit+slack {
		t.Fatalf("the evaluation stopped %v after it started, more than %v past its time limit of %v", got.took, slack, limit)
	}
	t.Logf("stopped after %v: %v", got.took, got.err)
}

// TestWalksOverSharedValuesStopWithTheEvaluation: a list or map whose
// elements are shared is small in memory but huge to walk ([x, x] nested
// forty times has 2^40 leaves). CEL checks its time limit only between the
// steps of a comprehension, and one call (==, in, indexOf, sets.contains,
// distinct, sort, the check of a generate expression's result) walks such a
// value with no comprehension at all: the evaluation stops within its time
// limit, not when the call returns, hours later.
func TestWalksOverSharedValuesStopWithTheEvaluation(t *testing.T) {
	const limit = 200 * time.Millisecond
	const depth = 40
	lists := append(nested("a", "['x']", "[%[1]s, %[1]s]", depth), nested("b", "['x']", "[%[1]s, %[1]s]", depth)...)
	maps := append(nested("a", "{'k': 'x'}", "{'k': %[1]s, 'j': %[1]s}", depth), nested("b", "{'k': 'x'}", "{'k': %[1]s, 'j': %[1]s}", depth)...)
	// 2^19 strings made by concatenation, each step charged by its result:
	// under the budget of one evaluation.
	strs := []string{"s0", "['" + strings.Join(strings.Split("ponmlkjihgfedcba", ""), "', '") + "']"}
	for i := 1; i <= 15; i++ {
		strs = append(strs, fmt.Sprintf("s%d", i), fmt.Sprintf("variables.s%d + variables.s%d", i-1, i-1))
	}
	last := fmt.Sprintf("variables.a%d", depth)
	for _, tc := range []struct {
		name, expr string
		vars       []string
	}{
		{"== on lists", last + " == variables.b40", lists},
		{"!= on maps", last + " != variables.b40", maps},
		{"in", fmt.Sprintf("variables.a%d in variables.b%d", depth-1, depth), lists},
		{"indexOf", fmt.Sprintf("variables.b%d.indexOf(variables.a%d) >= 0", depth, depth-1), lists},
		{"sets.contains", fmt.Sprintf("sets.contains(variables.b%d, [variables.a%d])", depth, depth-1), lists},
		{"distinct", "size(lists.range(100000).distinct()) > 0", nil},
		{"sort", "size(variables.s15.sort()) > 0", strs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := append(append([]string{}, tc.vars...), "out", tc.expr)
			stopsWithin(t, policyWith(false, `generator.Apply("x", variables.out ? [`+generatedCM+`] : [])`, vars...), limit)
		})
	}
	t.Run("a generate expression's result", func(t *testing.T) {
		stopsWithin(t, policyWith(false, last, nested("a", "[true]", "[%[1]s, %[1]s]", depth)...), limit)
	})
}

// cancelling is a GlobalContext whose entry, once read, cancels the
// evaluation's parent context: the controller deleting the policy while one
// of its evaluations runs.
type cancelling struct{ cancel context.CancelFunc }

func (c cancelling) Get(context.Context, string, string) (any, bool, error) {
	c.cancel()
	return "read", true, nil
}

// TestCancellingStopsAWalkUnderWay: the controller cancels the context of
// a deleted policy's sync. An evaluation then walking a value stops at
// once, with the cancellation as its error, rather than when its own time
// limit (or the walk) ends.
func TestCancellingStopsAWalkUnderWay(t *testing.T) {
	const limit = 2 * time.Second
	vars := append(nested("a", "['x']", "[%[1]s, %[1]s]", 40), nested("b", "['x']", "[%[1]s, %[1]s]", 40)...)
	// The variables are evaluated first: the walk is what runs when the
	// context is cancelled.
	vars = append(vars, "out", `size(variables.a40) + size(variables.b40) > 0 && globalContext.Get("e", "") != null && variables.a40 == variables.b40`)
	p := celenv.Compile(policyWith(false, `generator.Apply("x", variables.out ? [`+generatedCM+`] : [])`, vars...))
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := p.Evaluate(ctx, celenv.Input{Object: object("v1", "ConfigMap", "team", "cm").Object, Timeout: limit, GlobalContext: cancelling{cancel}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "spec.variables[82].expression: context canceled") {
			t.Fatalf("want the evaluation stopped by its cancellation in spec.variables[82], got %v", err)
		}
	case <-time.After(2 * limit):
		t.Fatalf("the evaluation still runs %v after it started, its time limit is %v", 2*limit, limit)
	}
}
