// Package integration drives retrystack through real third-party clients
// against servers on 127.0.0.1: google/go-github, coder/websocket,
// httputil.ReverseProxy and otelhttp. It is a module of its own so that the
// library's go.mod stays small; `.ci/run` runs its tests.
package integration
