// Package engine carries out retry policies: a generic loop, [Do], for any
// operation (a stream, an RPC), and the HTTP retry layer, [Engine.Layer],
// built on the same loop.
//
// For every attempt the HTTP layer sends the request as it came when
// nothing has to change, and otherwise a shallow copy of its own (never
// the caller's: a new context, the body replayed through GetBody, headers
// it sets); it bounds the attempt by min(AttemptTimeout, time left), and
// drains (bounded) and closes the body of every response it discards, so
// connections are reused. The response it hands back is untouched except
// that its body still obeys the attempt and total deadlines while the caller
// reads it.
//
// Waits obey the context and the deadline: a wait that cannot finish in time
// is never started, a server's Retry-After is never shortened, and a
// cancelled operation sends nothing more.
//
// Every logical operation produces a [Report] — attempts, statuses and
// errors, planned waits, elapsed time, stop reason and pitfalls — reachable
// from the response ([ReportOf]), from the error ([*Error],
// [*ExhaustedError]) and from [Hooks]. The engine never logs; unset hooks
// cost nothing.
//
// An Engine is safe for concurrent use; one engine serves every request of
// a client.
package engine
