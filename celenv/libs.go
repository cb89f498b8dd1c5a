package celenv

import "github.com/sprout-gitops/sprout/celenv/lib"

// What Input takes for Kyverno's http and globalContext libraries, and what
// makes it, are lib's; celenv names them so that a caller configures an
// evaluation through celenv alone.
type (
	// HTTP makes the calls of http.Get, Post and Put (lib.HTTP).
	HTTP = lib.HTTP
	// HTTPOptions says what http.Get, Post and Put may reach (lib.HTTPOptions).
	HTTPOptions = lib.HTTPOptions
	// HTTPRound is one round's calls and their results (lib.HTTPRound).
	HTTPRound = lib.HTTPRound
	// HTTPCall is one request made outside an evaluation (lib.HTTPCall).
	HTTPCall = lib.HTTPCall
	// GlobalContext serves globalContext.Get (lib.GlobalContext).
	GlobalContext = lib.GlobalContext
)

// DefaultHTTPTimeout bounds one http call (lib.DefaultHTTPTimeout).
const DefaultHTTPTimeout = lib.DefaultHTTPTimeout

// NewHTTP checks opts and makes the client (lib.NewHTTP).
func NewHTTP(opts HTTPOptions) (*HTTP, error) { return lib.NewHTTP(opts) }
