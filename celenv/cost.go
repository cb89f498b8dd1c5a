package celenv

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/sprout-gitops/sprout/celenv/celjson"
	"github.com/sprout-gitops/sprout/celenv/lib"
)

// Bounds on what one evaluation may cost, beyond PerCallCostLimit: cost
// stands for memory as much as for time, since a policy's author is not
// trusted with Sprout's heap.
const (
	// PerEvaluationCostLimit bounds the cost of all the expressions one
	// evaluation of a policy runs for one trigger, together: without it a
	// policy spreads its work over many variables, each under
	// PerCallCostLimit.
	PerEvaluationCostLimit = 5 * PerCallCostLimit
	// MaxParseBytes bounds the text yaml.parse and json.unmarshal accept,
	// checked before parsing (lib.MaxParseBytes).
	MaxParseBytes = lib.MaxParseBytes
	// MaxValueBytes bounds one value Sprout turns into JSON: json.marshal,
	// generator.Apply, setField, a template placeholder
	// (celjson.MaxValueBytes).
	MaxValueBytes = celjson.MaxValueBytes
	// MaxListElements bounds the elements of a list flatten builds, counted
	// before it is built: nested lists share their elements, so a list of
	// a few dozen values can stand for millions once flattened. It is
	// cel-go's own bound on lists.range.
	MaxListElements = 1_000_000
)

// Cost factors of Sprout's functions, in CEL's units: reading a string costs
// common.StringTraversalCostFactor per byte, as in CEL; building a value
// (parsing, serialising, copying) one per byte of it, as allocating is what
// a policy must pay for.
const (
	readCostPerByte  = common.StringTraversalCostFactor
	buildCostPerByte = 1.0
)

// costEstimator charges Sprout's functions by the size of what they read
// and build, at run time (CallCost) and in estimates (EstimateCallCost), and
// defers to the Kubernetes libraries' estimator for the rest.
type costEstimator struct {
	library.CostEstimator
}

// CallCost is the actual cost of one call, from its arguments and result.
func (c *costEstimator) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	if function == "_+_" {
		if cost, ok := concatCost(args, result); ok {
			return costPointer(cost)
		}
	}
	if cost, ok := callCost(overloadID, args, result); ok {
		return costPointer(cost)
	}
	switch function {
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes":
		if types.IsError(result) {
			// Refused, or stopped by the evaluation: what the call
			// walked was charged as it walked (walkedCall).
			return costPointer(1)
		}
		if len(args) > 0 {
			return costPointer(traversalCost(args[0]))
		}
	}
	return c.CostEstimator.CallCost(function, overloadID, args, result)
}

// traversalCost is the Kubernetes libraries' charge for the list functions
// that read every element (isSorted, sum, indexOf, …): a unit per element
// that is no list or map, a tenth per byte of a string. Theirs walks the
// whole value after the call, however large its elements' logical size;
// this one stops once it has visited PerCallCostLimit elements, past which
// the expression is over its limit anyway, and charges that. Below it the
// two charge the same.
func traversalCost(v ref.Val) uint64 {
	t := traversal{left: PerCallCostLimit}
	cost := t.cost(v)
	if t.left < 0 {
		return PerCallCostLimit + 1
	}
	return cost
}

// traversal counts the elements traversalCost has left to visit.
type traversal struct{ left int64 }

func (t *traversal) cost(v ref.Val) uint64 {
	if t.left--; t.left < 0 {
		return 0
	}
	switch x := v.(type) {
	case types.String:
		return uint64(float64(len(x)) * common.StringTraversalCostFactor)
	case types.Bytes:
		return uint64(float64(len(x)) * common.StringTraversalCostFactor)
	case traits.Lister:
		var cost uint64
		for it := x.Iterator(); t.left >= 0 && it.HasNext() == types.True; {
			cost += t.cost(it.Next())
		}
		return cost
	case traits.Mapper:
		var cost uint64
		for it := x.Iterator(); t.left >= 0 && it.HasNext() == types.True; {
			k := it.Next()
			cost += t.cost(k) + t.cost(x.Get(k))
		}
		return cost
	}
	return 1
}

func callCost(overloadID string, args []ref.Val, result ref.Val) (uint64, bool) {
	switch overloadID {
	case "json_unmarshal_string", "yaml_parse_string":
		n := stringBytes(args[1])
		if n > MaxParseBytes {
			// Refused before parsing: charging the text would report the
			// cost limit instead of the size limit.
			return 1, true
		}
		// Reading the text, and building the values: aliases make them
		// larger than the text, a size CEL sees only in the result.
		m := measure{left: maxCharged}
		m.native(result.Value())
		return 1 + scaled(n, readCostPerByte) + scaled(uint64(maxCharged-max(m.left, 0)), buildCostPerByte), true
	case "json_marshal_dyn":
		return 1 + scaled(stringBytes(result), buildCostPerByte), true
	case "sha256_string", "sha1_string", "md5_string",
		"hash_sha256_string", "hash_sha1_string", "hash_md5_string",
		"parseImageReference_string", "image_string", "isImage_string",
		"x509_decode_string":
		return 1 + scaled(stringBytes(args[0]), readCostPerByte), true
	case "random_string", "random_void", "random_random_string", "random_random_void":
		return 1 + scaled(stringBytes(result), buildCostPerByte), true
	case "listObjToMap_list_list_string_string", "transform_listObjToMap_list_list_string_string":
		return 1 + scaled(valueBytes(result, maxCharged), buildCostPerByte), true
	case "dyn_setField_string_dyn":
		return 1 + scaled(valueBytes(result, maxCharged), buildCostPerByte), true
	}
	switch {
	case strings.HasPrefix(overloadID, "generator_"):
		if g, ok := args[0].(*generation); ok {
			return 1 + scaled(g.lastBytes, buildCostPerByte), true
		}
		return 1 + scaled(valueBytes(args[len(args)-1], maxCharged), buildCostPerByte), true
	case strings.HasPrefix(overloadID, "http_"):
		// Reading the response and building its values.
		return 1 + scaled(valueBytes(result, maxCharged), buildCostPerByte), true
	case isResourceGet(overloadID), strings.HasPrefix(overloadID, "globalContext_"):
		// The reader shares its objects: reading one is what costs.
		return 1 + scaled(valueBytes(result, maxCharged), readCostPerByte), true
	case isResourceList(overloadID):
		// Selecting and sorting costs by the objects; reading them is
		// charged as expressions read them. Measuring every byte of a large
		// list here would cost as much as the list.
		return 1 + listItems(result), true
	}
	return 0, false
}

// concatCost charges a + b by what it makes, whatever overload CEL picked:
// on dyn operands (every variable is one) the overload is chosen at run
// time, and CEL's tracker, which goes by overload, then charges one.
func concatCost(args []ref.Val, result ref.Val) (uint64, bool) {
	switch result.(type) {
	case types.String, types.Bytes:
		// As CEL charges a typed concatenation: a traversal of both.
		return 1 + scaled(valueBytes(args[0], maxCharged)+valueBytes(args[1], maxCharged), readCostPerByte), true
	case traits.Lister:
		if _, ok := args[0].(traits.MutableLister); ok {
			// A comprehension's accumulator (map, filter), appended to in
			// place: the elements appended are what is made.
			return 1 + listSize(args[1]), true
		}
		// CEL concatenates lists lazily at a cost of one, so doubling a list
		// is free while what reads it (join, json.marshal, a template) pays
		// for every element: charge the elements when they are made.
		return 1 + listSize(result), true
	}
	return 0, false
}

// smallCosts are the costs most calls have, each with its own address: CEL
// takes a cost by pointer and only reads it, so returning one of these
// spares an allocation per call on the hot path.
var smallCosts = func() (c [256]uint64) {
	for i := range c {
		c[i] = uint64(i)
	}
	return c
}()

func costPointer(cost uint64) *uint64 {
	if cost < uint64(len(smallCosts)) {
		return &smallCosts[cost]
	}
	// Not &cost: that would move cost to the heap on every path.
	p := new(uint64)
	*p = cost
	return p
}

// maxCharged is where measuring a value stops: past it the expression is
// over its limit whatever the rest weighs.
const maxCharged = 16 * PerCallCostLimit

func isResourceGet(overloadID string) bool {
	return strings.HasPrefix(overloadID, "resource_Get_") || strings.HasPrefix(overloadID, "resource_get_")
}

func isResourceList(overloadID string) bool {
	return strings.HasPrefix(overloadID, "resource_List_") || strings.HasPrefix(overloadID, "resource_list_")
}

// listItems counts the items of a List object as resource.List returns it.
func listItems(v ref.Val) uint64 {
	if m, ok := v.Value().(map[string]any); ok {
		if items, ok := m["items"].([]any); ok {
			return uint64(len(items))
		}
	}
	return 1
}

// EstimateCallCost is the cost of a call the checker predicts from the sizes
// it knows: the same factors as CallCost, on the arguments' estimated sizes.
func (c *costEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	byArg := func(i int, factor float64) *checker.CallEstimate {
		if i >= len(args) {
			return nil
		}
		cost := checker.FixedCostEstimate(1).Add(sizeOf(args[i]).MultiplyByCostFactor(factor))
		return &checker.CallEstimate{CostEstimate: cost}
	}
	switch overloadID {
	case "json_unmarshal_string", "yaml_parse_string":
		// The values built are about the text's size (aliases aside).
		return byArg(0, readCostPerByte+buildCostPerByte)
	case "json_marshal_dyn":
		return byArg(0, buildCostPerByte)
	case "sha256_string", "sha1_string", "md5_string",
		"hash_sha256_string", "hash_sha1_string", "hash_md5_string",
		"parseImageReference_string", "image_string", "isImage_string",
		"x509_decode_string":
		return byArg(0, readCostPerByte)
	case "dyn_setField_string_dyn":
		if target != nil {
			cost := checker.FixedCostEstimate(1).Add(sizeOf(*target).MultiplyByCostFactor(buildCostPerByte))
			return &checker.CallEstimate{CostEstimate: cost}
		}
	case "add_list":
		if len(args) == 2 {
			size := sizeOf(args[0]).Add(sizeOf(args[1]))
			return &checker.CallEstimate{CostEstimate: checker.FixedCostEstimate(1).Add(size.MultiplyByCostFactor(1)), ResultSize: &size}
		}
	}
	if strings.HasPrefix(overloadID, "generator_") {
		return byArg(len(args)-1, buildCostPerByte)
	}
	if isResourceGet(overloadID) || isResourceList(overloadID) || strings.HasPrefix(overloadID, "globalContext_") {
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: math.MaxUint64}}
	}
	return c.CostEstimator.EstimateCallCost(function, overloadID, target, args)
}

// sizeOf is the size the checker knows of a node, or any size.
func sizeOf(n checker.AstNode) checker.SizeEstimate {
	if sz := n.ComputedSize(); sz != nil {
		return *sz
	}
	return checker.UnknownSizeEstimate()
}

func scaled(n uint64, factor float64) uint64 {
	return uint64(math.Ceil(float64(n) * factor))
}

func stringBytes(v ref.Val) uint64 {
	if s, ok := v.(types.String); ok {
		return uint64(len(s))
	}
	return 0
}

func listSize(v ref.Val) uint64 {
	if l, ok := v.(traits.Lister); ok {
		if n, ok := l.Size().(types.Int); ok {
			return uint64(n)
		}
	}
	return 1
}

// valueBytes is about the length of v as JSON, counted up to limit: the
// walk stops there, so measuring a huge value costs no more than the limit.
func valueBytes(v ref.Val, limit uint64) uint64 {
	m := measure{left: int64(limit)}
	m.value(v)
	return limit - uint64(max(m.left, 0))
}

// measure walks a value, native Go (as objects from the cluster are) or
// CEL, taking its size off left until it runs out.
type measure struct{ left int64 }

func (m *measure) value(v ref.Val) {
	switch x := v.(type) {
	case types.String:
		m.left -= int64(len(x)) + 2
		return
	case types.Bytes:
		m.left -= int64(len(x)) + 2
		return
	case traits.Mapper, traits.Lister:
	default:
		m.left -= 8
		return
	}
	// A map from the cluster wraps a Go map, walked as it is. A list is
	// walked through CEL: asking a concatenated one for its Go value would
	// build it.
	if mp, ok := v.(traits.Mapper); ok {
		if native, ok := mp.Value().(map[string]any); ok {
			m.native(native)
			return
		}
	}
	if l, ok := v.(traits.Lister); ok {
		for it := l.Iterator(); m.left > 0 && it.HasNext() == types.True; {
			m.left--
			m.value(it.Next())
		}
		return
	}
	mp := v.(traits.Mapper)
	for it := mp.Iterator(); m.left > 0 && it.HasNext() == types.True; {
		k := it.Next()
		m.left--
		m.value(k)
		m.value(mp.Get(k))
	}
}

func (m *measure) native(v any) {
	switch x := v.(type) {
	case string:
		m.left -= int64(len(x)) + 2
	case map[string]any:
		for k, e := range x {
			if m.left <= 0 {
				return
			}
			m.left -= int64(len(k)) + 3
			m.native(e)
		}
	case []any:
		for _, e := range x {
			if m.left <= 0 {
				return
			}
			m.left--
			m.native(e)
		}
	default:
		m.left -= 8
	}
}

// evaluationBudget is what one evaluation of a policy has left to spend: each
// expression it runs (variables, matchConditions, generate entries,
// template placeholders), each text a template builds and each walk over a
// value (visit) is charged to it. Spending it all cancels the evaluation, so
// an expression under way stops at its next check and a value that was
// computed is not used.
//
// It rides on the generation, which every activation of the evaluation
// holds, and cancels the evaluation's own context: no context of its own.
// One evaluation runs on one goroutine, so it needs no lock.
type evaluationBudget struct {
	spent  uint64
	cancel context.CancelFunc // the evaluation's
	err    error              // why it cancelled, once it has
	// done is the evaluation's context's: walks look at it (settle).
	done <-chan struct{}
	// walked counts what walks visited since they last settled.
	walked uint64
	// stopped is set once a walk saw the budget spent or the context
	// ended: every walk after it stops at once.
	stopped bool
}

// charge spends cost from the budget of the evaluation whose activation
// this is, if it has one.
func charge(activation map[string]any, cost uint64) {
	g, _ := activation[varGenerator].(*generation)
	if g == nil || g.budget.cancel == nil {
		return
	}
	b := &g.budget
	b.spent += cost
	if b.spent > PerEvaluationCostLimit {
		b.exceeded()
	}
}

// activationBudget is the budget of the evaluation whose activation this is.
func activationBudget(activation map[string]any) *evaluationBudget {
	if g, _ := activation[varGenerator].(*generation); g != nil {
		return &g.budget
	}
	return &evaluationBudget{}
}

// exceeded records that the budget is spent and cancels the evaluation, once.
func (b *evaluationBudget) exceeded() {
	if b.err != nil {
		return
	}
	b.err = fmt.Errorf("the expressions of one evaluation cost more than their limit of %d together", PerEvaluationCostLimit)
	if b.cancel != nil {
		b.cancel()
	}
}

// cause is why the evaluation whose context and activation these are
// stopped: its budget ran out, or its context ended.
func cause(ctx context.Context, activation map[string]any) error {
	if g, _ := activation[varGenerator].(*generation); g != nil && g.budget.err != nil {
		return g.budget.err
	}
	return context.Cause(ctx)
}
