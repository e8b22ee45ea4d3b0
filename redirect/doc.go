// Package redirect is the redirect layer: it follows 301, 302, 303, 307 and
// 308 responses one hop at a time through the layers below it, so each hop
// passes through cookies and retry on its own and shares the client's retry
// budget, as reqwest's FollowRedirect does.
//
// The method and body follow net/http's rules: 301, 302 and 303 turn any
// method but GET and HEAD into a GET without a body, and 307 and 308 keep
// the method and replay the body through GetBody; a 307/308 whose body
// cannot be replayed is returned as it is. Unlike net/http, no Referer is
// set. A hop to another origin (scheme, host or
// port) drops Authorization, Cookie, Proxy-Authorization and
// WWW-Authenticate, and they stay dropped for the rest of the chain; an
// https → http hop is such a hop, so credentials never travel in the clear.
// A Location that is not http or https, or cannot be parsed, fails with a
// *LocationError; more than MaxHops hops fail with a *TooManyHopsError.
package redirect
