package lib

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"regexp/syntax"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// Bounds of random(pattern): the pattern is the policy author's, so what it
// may ask for is bounded before anything is generated.
const (
	// maxRandomPattern bounds the pattern's text.
	maxRandomPattern = 1 << 10
	// maxRandomOutput bounds the string generated.
	maxRandomOutput = 4 << 10
	// randomOpenRepeat is how many more times than its minimum an open
	// repetition (*, +, {n,}) repeats at most, as Kyverno's generator does.
	randomOpenRepeat = 10
)

// defaultRandomPattern is what random() without a pattern generates.
const defaultRandomPattern = "[0-9a-z]{8}"

// randomLibrary declares Kyverno's random, under its two spellings:
//
//	random() -> string              // 8 characters of [0-9a-z]
//	random(pattern) -> string       // random("[A-Z]{3}-[0-9]{4}") → "QXE-0417"
//	random.random([pattern]) -> string
//
// Like time.now(), a random value written into an object changes the object
// at every evaluation. The numbers come from crypto/rand.
func randomLibrary() cel.EnvOption {
	overloads := func(prefix string) []cel.FunctionOpt {
		return []cel.FunctionOpt{
			cel.Overload(prefix+"random_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(p ref.Val) ref.Val {
					s, ok := p.(types.String)
					if !ok {
						return types.MaybeNoSuchOverloadErr(p)
					}
					return randomString(string(s))
				})),
			cel.Overload(prefix+"random_void", []*cel.Type{}, cel.StringType,
				cel.FunctionBinding(func(...ref.Val) ref.Val { return randomString(defaultRandomPattern) })),
		}
	}
	return cel.Lib(utilityLibrary{compile: []cel.EnvOption{
		cel.Function("random", overloads("")...),
		cel.Function("random.random", overloads("random_")...),
	}})
}

// randomString generates a string that pattern matches.
func randomString(pattern string) ref.Val {
	if len(pattern) > maxRandomPattern {
		return types.NewErr("random: the pattern has %d bytes, over the limit of %d", len(pattern), maxRandomPattern)
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return types.NewErr("random: %v", err)
	}
	var b strings.Builder
	if err := generateMatch(&b, re.Simplify()); err != nil {
		return types.NewErr("random(%q): %v", pattern, err)
	}
	return types.String(b.String())
}

// generateMatch appends to b a random string that re matches.
func generateMatch(b *strings.Builder, re *syntax.Regexp) error {
	if b.Len() > maxRandomOutput {
		return fmt.Errorf("the string would be longer than %d bytes", maxRandomOutput)
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		b.WriteRune(randomInClass(re.Rune))
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteRune(rune(' ' + randomIntN('~'-' '+1)))
	case syntax.OpCapture:
		return generateMatch(b, re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if err := generateMatch(b, sub); err != nil {
				return err
			}
		}
	case syntax.OpAlternate:
		return generateMatch(b, re.Sub[randomIntN(len(re.Sub))])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		return generateRepeat(b, re)
	}
	// Empty matches and anchors (^, $, \b) add nothing.
	return nil
}

// generateRepeat appends a repetition of re's one sub-expression, a random
// number of times within its bounds.
func generateRepeat(b *strings.Builder, re *syntax.Regexp) error {
	low, high := re.Min, re.Max
	switch re.Op {
	case syntax.OpStar:
		low, high = 0, -1
	case syntax.OpPlus:
		low, high = 1, -1
	case syntax.OpQuest:
		low, high = 0, 1
	}
	if high < 0 {
		high = low + randomOpenRepeat
	}
	for range low + randomIntN(high-low+1) {
		if err := generateMatch(b, re.Sub[0]); err != nil {
			return err
		}
	}
	return nil
}

// randomInClass picks a rune uniformly from a class given as ranges, pairs
// of lowest and highest rune.
func randomInClass(ranges []rune) rune {
	total := 0
	for i := 0; i < len(ranges); i += 2 {
		total += int(ranges[i+1]-ranges[i]) + 1
	}
	if total == 0 {
		return ' '
	}
	n := randomIntN(total)
	for i := 0; i < len(ranges); i += 2 {
		size := int(ranges[i+1]-ranges[i]) + 1
		if n < size {
			return ranges[i] + rune(n)
		}
		n -= size
	}
	return ranges[0]
}

// randomIntN is a uniform random number in [0, n), from crypto/rand: a
// policy may make passwords or tokens with random().
func randomIntN(n int) int {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		// crypto/rand does not fail on the platforms Sprout runs on.
		panic(fmt.Sprintf("random: %v", err))
	}
	return int(v.Int64())
}
