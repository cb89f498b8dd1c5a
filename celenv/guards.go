package celenv

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// sizeGuards are the library functions whose result can be far larger than
// their arguments: s.replace("", big) repeats big, a list of one string
// repeated by concatenation joins into its copies. CEL charges them by their
// result, once it is built; each guard computes the size of the result from
// the arguments and refuses one over MaxValueBytes before it is built.
var sizeGuards = map[string]func(args []ref.Val) error{
	"replace": guardReplace,
	"join":    guardJoin,
	"format":  guardFormat,
	"flatten": guardFlatten,
}

func tooLarge(size int64) error {
	if size > MaxValueBytes {
		return fmt.Errorf("the result would have %d bytes or more, over the limit of %d", size, MaxValueBytes)
	}
	return nil
}

// guardReplace sizes s.replace(old, new[, n]).
func guardReplace(args []ref.Val) error {
	if len(args) < 3 {
		return nil
	}
	s, ok1 := args[0].(types.String)
	old, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	if !ok1 || !ok2 || !ok3 || len(repl) <= len(old) {
		return nil
	}
	var count int64
	if old == "" {
		count = int64(utf8.RuneCountInString(string(s))) + 1
	} else {
		count = int64(strings.Count(string(s), string(old)))
	}
	if len(args) == 4 {
		if n, ok := args[3].(types.Int); ok && n >= 0 && int64(n) < count {
			count = int64(n)
		}
	}
	return tooLarge(int64(len(s)) + count*int64(len(repl)-len(old)))
}

// guardJoin sizes list.join([sep]), adding up the strings until they are
// over the limit.
func guardJoin(args []ref.Val) error {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	var sep int64
	if len(args) == 2 {
		if s, ok := args[1].(types.String); ok {
			sep = int64(len(s))
		}
	}
	var size int64
	for it := l.Iterator(); it.HasNext() == types.True; {
		if s, ok := it.Next().(types.String); ok {
			size += int64(len(s))
		}
		size += sep
		if err := tooLarge(size); err != nil {
			return err
		}
	}
	return nil
}

// guardFlatten counts the elements list.flatten([depth]) makes, stopping
// once they are over MaxListElements: the count visits no more than that
// many leaves, however much the nested lists share.
func guardFlatten(args []ref.Val) error {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	depth := int64(1)
	if len(args) == 2 {
		if d, ok := args[1].(types.Int); ok {
			depth = int64(d)
		}
	}
	budget := int64(MaxListElements)
	if !countFlat(l, depth, &budget) {
		return fmt.Errorf("the result would have more than %d elements", MaxListElements)
	}
	return nil
}

// countFlat takes the elements l flattened to depth makes from budget,
// and reports whether they fit.
func countFlat(l traits.Lister, depth int64, budget *int64) bool {
	n, ok := l.Size().(types.Int)
	if !ok {
		return true // not a list CEL built: flatten reports it
	}
	// By index rather than by iterator: an iterator is an allocation for
	// each of the (many) inner lists visited.
	for i := types.Int(0); i < n; i++ {
		v := l.Get(i)
		if inner, ok := v.(traits.Lister); ok && depth > 0 {
			if !countFlat(inner, depth-1, budget) {
				return false
			}
			continue
		}
		if *budget--; *budget < 0 {
			return false
		}
	}
	return true
}

// guardFormat sizes format.format(args) by its arguments as JSON, about as
// long as %s writes them.
func guardFormat(args []ref.Val) error {
	if len(args) != 2 {
		return nil
	}
	size := int64(stringBytes(args[0])) + int64(valueBytes(args[1], MaxValueBytes+1))
	return tooLarge(size)
}
