// Package retrystack assembles the default retry stack: redirect → cookies
// → retry → transport, reqwest's order, as named middleware layers that can
// be printed, reordered and embedded in other client stacks.
//
//	client, err := retrystack.NewClient(retrystack.Config{})
//
// The returned *http.Client has its own redirect following and cookie jar
// switched off (CheckRedirect returns http.ErrUseLastResponse, Jar is nil):
// the stack does both, once. See packages policy and engine for what is
// retried and how, and package middleware for reordering a stack.
package retrystack
