// Package lib owns Kyverno's CEL function libraries as Sprout declares them
// (json, yaml, hash, time, math, image, random, x509, transform, http,
// globalContext) and the refusal of the ones Sprout does not provide, with
// the HTTP client behind http.Get and the values the stateful ones (time,
// http, globalContext) take in one evaluation.
//
// celenv declares them in its environments (Libraries) and binds their
// variables for each evaluation (Bind); lib knows nothing of policies.
// What a function copies into JSON goes through celjson, bounded.
package lib

import (
	"context"
	"time"

	"github.com/google/cel-go/cel"
)

// MaxParseBytes bounds the text yaml.parse and json.unmarshal accept,
// checked before parsing: a parser allocates many times its input, so a
// cost charged after the parse would come too late.
const MaxParseBytes = 512 << 10

// Libraries declares Kyverno's libraries, and the names of those Sprout
// refuses at compile time. resource is the type of celenv's resource
// variable: some of Kyverno's calls on it are refused, by overload.
func Libraries(resource *cel.Type) []cel.EnvOption {
	return []cel.EnvOption{
		jsonLibrary(),
		yamlLibrary(),
		hashLibrary(),
		timeLibrary(),
		mathLibrary(),
		imageLibrary(),
		randomLibrary(),
		x509Library(),
		transformLibrary(),
		httpLibrary(),
		globalContextLibrary(),
		unsupportedLibrary(resource),
	}
}

// Library is a cel.Library of plain compile options, as every library here
// is declared.
func Library(compile ...cel.EnvOption) cel.EnvOption {
	return cel.Lib(utilityLibrary{compile: compile})
}

// Bindings are the values of the libraries' variables (time, http,
// globalContext) for one evaluation, and what that evaluation did with
// them.
type Bindings struct {
	clock   clock
	http    *httpCalls
	entries *globalContextReads
}

// Bind makes one evaluation's bindings: time.now() returns now (the wall
// clock when zero), http calls go through round (nil: no host is allowed)
// and globalContext reads entries (nil: no entry exists), each under ctx.
func Bind(ctx context.Context, now time.Time, round *HTTPRound, entries GlobalContext) Bindings {
	return Bindings{
		clock:   newClock(now),
		http:    &httpCalls{ctx: ctx, round: round, used: new(bool)},
		entries: &globalContextReads{ctx: ctx, source: entries, used: new(bool)},
	}
}

// AddTo sets the variables in activation.
func (b Bindings) AddTo(activation map[string]any) {
	activation[varTime] = b.clock
	activation[varHTTP] = b.http
	activation[varGlobalContext] = b.entries
}

// Used reports whether the evaluation read the clock, called http or read
// globalContext so far: its result then depends on more than its input.
func (b Bindings) Used() bool {
	return *b.clock.read || *b.http.used || *b.entries.used
}
