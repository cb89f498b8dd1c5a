package celenv

import (
	"context"
	"testing"
	"time"

	"github.com/google/cel-go/common/types"

	"github.com/sprout-gitops/sprout/celenv/lib"
)

// TestWalkedCallsAnswerAsCELDoes: the calls that walk values through the
// evaluation's budget (walkOption) answer ordinary expressions as CEL's
// own implementations do. Each expression is evaluated twice, planned with
// Sprout's options and with CEL's alone, and the answers compared.
func TestWalkedCallsAnswerAsCELDoes(t *testing.T) {
	env, _, err := environments()
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{
		"metadata": map[string]any{"name": "cm", "labels": map[string]any{"a": "1", "b": "2"}},
		"data":     map[string]any{"list": []any{"x", "y"}, "n": int64(3)},
	}
	for _, expr := range []string{
		`[1, [2, {'a': 3}]] == [1, [2, {'a': 3}]]`,
		`[1, [2, {'a': 3}]] == [1, [2, {'a': 4}]]`,
		`[1, 2] == [1, 2, 3]`,
		`[1, 2u, 3.0] == [1.0, 2, 3u]`,
		`[null, 'x'] == [null, 'x']`,
		`[null] == dyn([0])`,
		`[0.0 / 0.0] == [0.0 / 0.0]`,
		`[[0.0 / 0.0]] != [[0.0 / 0.0]]`,
		`{'a': [1], 'b': {'c': 'd'}} == {'b': {'c': 'd'}, 'a': [1]}`,
		`{'a': [1]} != {'a': [2]}`,
		`{1: 'x'} == dyn({1u: 'x'})`,
		`{'a': 1} == {'b': 1}`,
		`{'a': 1} == dyn([1])`,
		`optional.of([1, {'a': 2}]) == optional.of([1, {'a': 2}])`,
		`optional.of([1]) == optional.none()`,
		`object == object`,
		`object.metadata == {'name': 'cm', 'labels': {'a': '1', 'b': '2'}}`,
		`object.data.list == ['x', 'y']`,
		`object.metadata.labels != {'a': '1'}`,
		`dyn([1]) == dyn({'a': 1})`,
		`[1] in [[1], [2]]`,
		`dyn({'a': 1}) in [{'a': 1u}]`,
		`[3] in [[1], [2]]`,
		`'a' in {'a': 1}`,
		`2 in [1, 2, 3]`,
		`'y' in object.data.list`,
		`[[1], [2], [1]].indexOf([1])`,
		`[[1], [2], [1]].lastIndexOf([1])`,
		`[1, 2].indexOf(3)`,
		`'hello'.indexOf('l')`,
		`sets.contains([[1], [2]], [[2]])`,
		`sets.equivalent([[1], [2]], [[2], [1], [1]])`,
		`sets.intersects([{'a': 1}], [{'a': 2}])`,
		`[[1, 2], [1, 2], [3]].distinct()`,
		`[3, 1, 2].sort()`,
		`['b', 'a'].sortBy(x, x)`,
		`[{'n': 2}, {'n': 1}].sortBy(m, m.n)`,
		`[1, 2, 3].isSorted()`,
		`[1, 2, 3].sum()`,
		`[1, 2, 3].max()`,
		`[[1], [2, [3]]].flatten()`,
		`[[1], [2]].reverse()`,
		`[[1], [2], [3]].slice(1, 2)`,
		`['a', 'b'].join('-')`,
		`'%s and %d'.format([[1, 'a'], 2])`,
		`math.greatest([1, 5, 3])`,
		`json.marshal({'a': [1, 2]})`,
		`size([1, 2] + [3])`,
		`[1, 2].exists(x, x == 2)`,
		`object.data.n == 3`,
		`'abc'.startsWith('a')`,
	} {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Errorf("%s: %v", expr, iss.Err())
			continue
		}
		plain, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		walked, err := env.Program(ast, programOptions(env)...)
		if err != nil {
			t.Fatal(err)
		}
		rd := &reads{ctx: context.Background()}
		activation := func() map[string]any {
			activation := map[string]any{
				varObject: obj, varOldObject: nil, varRequest: map[string]any{}, varNamespaceObject: nil,
				varVariables: map[string]any{}, varGenerator: &generation{reads: rd}, varResource: rd,
			}
			lib.Bind(context.Background(), time.Unix(0, 0), nil, nil).AddTo(activation)
			return activation
		}
		want, _, wantErr := plain.Eval(activation())
		got, _, gotErr := walked.Eval(activation())
		switch {
		case (wantErr != nil) != (gotErr != nil):
			t.Errorf("%s: CEL says %v (%v), Sprout %v (%v)", expr, want, wantErr, got, gotErr)
		case wantErr == nil && (want.Type() != got.Type() || types.Equal(want, got) != types.True):
			t.Errorf("%s: CEL says %v, Sprout %v", expr, want, got)
		}
	}
}
