// Package cookiejar is the cookie layer: it adds the Cookie header from an
// http.CookieJar to each request that passes through it and stores the
// Set-Cookie of each response it sees.
//
// Where it sits decides what it sees. In reqwest's order, redirect →
// cookies → retry → transport, it sees only the response the retry layer
// finally hands back: a Set-Cookie on an attempt the retry layer threw away
// never reaches the jar (reqwest loses it silently). The layer installs a
// discard observer in the operation that the retry layers below it call,
// and stores those cookies too, so nothing is lost; with
// Config.DropDiscarded it drops them as reqwest does, and the engine
// reports the pitfall cookie-lost with their names (never their values).
// Swapping the two layers (stack.Swap("cookies", "retry")) lets every
// attempt pass through the cookie layer.
//
// Under retrystack.NewTransport there is no cookie layer: the retry layer
// carries the Set-Cookie lines of the responses it throws away onto the
// response it hands back, so the http.Client's Jar above stores them; when
// it hands back an error instead, it reports cookie-lost.
package cookiejar
