// Package retrystack assembles retrystack's layers into the two things
// programs hand to net/http.
//
// NewTransport is a retrying http.RoundTripper for an SDK, a reverse proxy
// or any *http.Client: the retry layer alone (and telemetry when
// configured). It keeps no cookies and follows no redirects; the client
// above does both, per hop.
//
//	rt, err := retrystack.NewTransport(retrystack.Config{})
//	sdk := github.NewClient(&http.Client{Transport: rt})
//
// NewClient is the full stack as an *http.Client, in reqwest's order:
// redirect → cookies → retry → transport. The stack follows redirects and
// keeps cookies (when Config.Cookies has a Jar) itself, so every hop passes
// through cookies and retry; the client's own CheckRedirect and Jar are off,
// and a request through it after they were changed is a *policy.ConfigError.
//
//	client, err := retrystack.NewClient(retrystack.Config{})
//
// NewStack and Client give the same layers as a middleware.Stack to
// reorder and extend. See packages policy and engine for what is retried
// and how.
package retrystack
