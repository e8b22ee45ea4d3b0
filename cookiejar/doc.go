// Package cookiejar is the cookie layer: it adds the Cookie header from an
// http.CookieJar to each request that passes through it and stores the
// Set-Cookie of each response it sees.
//
// Where it sits decides what it sees. In reqwest's order, redirect →
// cookies → retry → transport, it sees only the response the retry layer
// finally hands back: a Set-Cookie on an attempt the retry layer threw away
// never reaches the jar (reqwest loses it silently). The layer installs a
// discard observer in the operation that the retry layers below it call: the
// engine then reports the pitfall cookie-lost with the cookie names (never
// their values), or, with Config.CaptureDiscarded, the layer stores those
// cookies too, so nothing is lost. Swapping the two layers
// (stack.Swap("cookies", "retry")) fixes it as well: then every attempt
// passes through the cookie layer.
package cookiejar
