// Package middleware composes named http.RoundTripper layers into a stack.
//
// A [Layer] is a name plus a function that wraps the next RoundTripper. A
// [Stack] is an ordered list of layers, outermost first, that can be printed,
// reordered, trimmed and extended by name, so an experiment such as "what if
// cookies sit inside retry?" is one call:
//
//	s, err := stack.Swap("cookies", "retry")
//
// [Stack.Then] builds the RoundTripper that runs the layers in order over a
// base transport. The result plugs into any *http.Client, or into any SDK that
// accepts one.
//
// Every layer obeys the RoundTripper contract: it never modifies the caller's
// request (it clones it), never returns a response together with a non-nil
// error, closes the request body on every path, and forwards
// CloseIdleConnections to the transport.
//
// A request that enters a stack starts an [Operation], shared by every
// layer below across its attempts, hedges and redirect hops. A layer of
// yours reads it with [OperationOf] (the attempt, the sends so far, the
// deadline, the idempotency key, the retry budget), tells what happened in
// it as an [Event] with [Operation.Emit], and refuses a request with an
// error that names its stop reason (policy.Refusal), as the library's own
// layers do.
//
// The stock layers are small: [ErrorForStatus] turns a final status >= 400
// into a [*StatusError] (the fix for the "Ok(503)" trap), and [HeaderFunc] sets
// headers, per attempt inside a retry layer. Deadlines are the retry layer's:
// Policy.Timeout for the operation, Policy.AttemptTimeout for each attempt,
// the read of the body included.
package middleware
