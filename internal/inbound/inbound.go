// Package inbound is what crosslayer.Handler tells the retry layers of a
// service about the request the service is answering: where it sits in
// its caller's retries, and whether a retry layer of the service gave up
// in a way its caller should not retry.
package inbound

import (
	"context"
	"sync/atomic"
)

// State is one inbound request's.
type State struct {
	Attempt int // the inbound request's attempt at its caller, 1-based
	Max     int // its caller's most attempts, 0 if not said

	pushback atomic.Bool
}

// PushBack records that a retry layer serving the request gave up after
// retrying, or was told not to retry: the service's answer should say "do
// not retry" to its own caller.
func (s *State) PushBack() { s.pushback.Store(true) }

// PushedBack reports whether PushBack was called.
func (s *State) PushedBack() bool { return s.pushback.Load() }

type key struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s *State) context.Context { return context.WithValue(ctx, key{}, s) }

// From returns the State ctx carries, or nil.
func From(ctx context.Context) *State {
	s, _ := ctx.Value(key{}).(*State)
	return s
}
