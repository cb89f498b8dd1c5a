package celenv

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sprout-gitops/sprout/celenv/lib"
)

// actualCost evaluates expr with object bound to obj and returns the cost
// CEL's tracker charged, whether the expression succeeded or not.
func actualCost(t *testing.T, expr string, obj map[string]any, reader Reader) uint64 {
	t.Helper()
	env, _, err := environments()
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%.80s: %v", expr, iss.Err())
	}
	prog, err := env.Program(ast, programOptions(env)...)
	if err != nil {
		t.Fatal(err)
	}
	rd := &reads{ctx: context.Background(), reader: reader}
	activation := map[string]any{
		varObject: obj, varOldObject: nil, varRequest: map[string]any{}, varNamespaceObject: nil,
		varVariables: map[string]any{}, varGenerator: &generation{reads: rd}, varResource: rd,
	}
	lib.Bind(context.Background(), time.Unix(0, 0), nil, nil).AddTo(activation)
	_, det, _ := prog.Eval(activation)
	if det == nil || det.ActualCost() == nil {
		t.Fatalf("%s: no cost tracked", expr)
	}
	return *det.ActualCost()
}

// bigObject is a ConfigMap with n bytes of data.
func bigObject(name string, n int) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "team"},
		"data":     map[string]any{"k": strings.Repeat("x", n)}}
}

// TestCostGrowsWithInput evaluates each of Sprout's functions on a small
// input and on one a thousand times larger: the large one must cost at least
// a hundred times more.
func TestCostGrowsWithInput(t *testing.T) {
	const small, big = 100, 100_000
	text := func(n int) map[string]any {
		return map[string]any{
			"s":    strings.Repeat("x", n),
			"json": `"` + strings.Repeat("x", n) + `"`,
			"yaml": "k: " + strings.Repeat("x", n),
			"v":    bigObject("cm", n),
			"l":    make([]any, n),
		}
	}
	// One object of n bytes for resource.Get, and n/100 small ones for
	// resource.List, charged by the objects it selects.
	reader := func(n int) Reader {
		list := []*unstructured.Unstructured{{Object: bigObject("cm", n)}}
		for i := range n / 100 {
			list = append(list, &unstructured.Unstructured{Object: bigObject(fmt.Sprintf("cm-%d", i), 100)})
		}
		return NewObjectReader(list)
	}
	for _, expr := range []string{
		`json.unmarshal(object.json)`,
		`yaml.parse(object.yaml)`,
		`json.marshal(object.v)`,
		`sha256(object.s)`,
		`sha1(object.s)`,
		`md5(object.s)`,
		`parseImageReference(object.s)`,
		`image(object.s)`,
		`isImage(object.s)`,
		`object.v.setField("metadata.name", "copy")`,
		`generator.Apply("team", [object.v])`,
		`resource.Get("v1", "configmaps", "team", "cm")`,
		`resource.List("v1", "configmaps", "team")`,
		`object.l + object.l`,
	} {
		t.Run(expr, func(t *testing.T) {
			s := actualCost(t, expr, text(small), reader(small))
			b := actualCost(t, expr, text(big), reader(big))
			if b < 100*s {
				t.Errorf("input 1000 times larger costs %d, %d times the small one's %d", b, b/max(s, 1), s)
			}
		})
	}
}

// TestEstimatedCostGrowsWithInput checks the checker's estimate the same
// way, on literals whose size it knows.
func TestEstimatedCostGrowsWithInput(t *testing.T) {
	env, _, err := environments()
	if err != nil {
		t.Fatal(err)
	}
	estimate := func(expr string) uint64 {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%.80s: %v", expr, iss.Err())
		}
		est, err := env.EstimateCost(ast, &costEstimator{})
		if err != nil {
			t.Fatal(err)
		}
		return est.Max
	}
	for _, fn := range []string{"json.unmarshal", "yaml.parse", "sha256", "sha1", "md5", "parseImageReference", "image", "isImage"} {
		t.Run(fn, func(t *testing.T) {
			s := estimate(fn + "('" + strings.Repeat("1", 50) + "')")
			b := estimate(fn + "('" + strings.Repeat("1", 50_000) + "')")
			if b < 100*s {
				t.Errorf("a literal 1000 times longer is estimated at %d, %d times the short one's %d", b, b/max(s, 1), s)
			}
		})
	}
	t.Run("list concatenation", func(t *testing.T) {
		l := func(n int) string { return "[" + strings.Repeat("1,", n) + "1]" }
		s, b := estimate(l(10)+"+"+l(10)), estimate(l(10_000)+"+"+l(10_000))
		if b < 100*s {
			t.Errorf("lists 1000 times longer are estimated at %d, %d times the short ones' %d", b, b/max(s, 1), s)
		}
	})
}

// TestComprehensionsCostLinearly: map and filter append to their result in
// place, so charging list concatenation by its result must not charge them
// again for every element already there.
func TestComprehensionsCostLinearly(t *testing.T) {
	for _, expr := range []string{"lists.range(%d).map(i, i)", "lists.range(%d).filter(i, i >= 0)"} {
		small := actualCost(t, fmt.Sprintf(expr, 100), nil, nil)
		big := actualCost(t, fmt.Sprintf(expr, 1000), nil, nil)
		if big > 20*small {
			t.Errorf("%s: ten times the elements cost %d times more", expr, big/small)
		}
	}
}
