package middleware_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
)

func pass(name string) middleware.Layer {
	return middleware.Layer{Name: name, Wrap: func(next http.RoundTripper) http.RoundTripper { return next }}
}

func mustStack(t *testing.T, names ...string) middleware.Stack {
	t.Helper()
	layers := make([]middleware.Layer, len(names))
	for i, n := range names {
		layers[i] = pass(n)
	}
	s, err := middleware.NewStack(layers...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewStackRejects(t *testing.T) {
	wrap := pass("x").Wrap
	tests := []struct {
		name   string
		layers []middleware.Layer
		want   error
	}{
		{"empty name", []middleware.Layer{{Name: "", Wrap: wrap}}, &middleware.LayerError{Name: "", Reason: "empty name"}},
		{"reserved", []middleware.Layer{{Name: "transport", Wrap: wrap}}, &middleware.LayerError{Name: "transport", Reason: "name reserved for the base"}},
		{"comma", []middleware.Layer{{Name: "a,b", Wrap: wrap}}, &middleware.LayerError{Name: "a,b", Reason: "name contains a comma or space"}},
		{"nil wrap", []middleware.Layer{{Name: "a"}}, &middleware.LayerError{Name: "a", Reason: "nil Wrap"}},
		{"duplicate", []middleware.Layer{pass("a"), pass("b"), pass("a")}, &middleware.LayerError{Name: "a", Reason: "duplicate name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := middleware.NewStack(tt.layers...)
			if diff := cmp.Diff(tt.want, err); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStackEdits(t *testing.T) {
	base := mustStack(t, "redirect", "cookies", "retry")
	tests := []struct {
		name string
		edit func(middleware.Stack) (middleware.Stack, error)
		want []string
	}{
		{"swap", func(s middleware.Stack) (middleware.Stack, error) { return s.Swap("cookies", "retry") }, []string{"redirect", "retry", "cookies"}},
		{"swap self", func(s middleware.Stack) (middleware.Stack, error) { return s.Swap("retry", "retry") }, []string{"redirect", "cookies", "retry"}},
		{"without", func(s middleware.Stack) (middleware.Stack, error) { return s.Without("cookies") }, []string{"redirect", "retry"}},
		{"without last", func(s middleware.Stack) (middleware.Stack, error) { return s.Without("retry") }, []string{"redirect", "cookies"}},
		{"insert before first", func(s middleware.Stack) (middleware.Stack, error) { return s.InsertBefore("redirect", pass("otel")) }, []string{"otel", "redirect", "cookies", "retry"}},
		{"insert after last", func(s middleware.Stack) (middleware.Stack, error) { return s.InsertAfter("retry", pass("attempt")) }, []string{"redirect", "cookies", "retry", "attempt"}},
		{"insert after middle", func(s middleware.Stack) (middleware.Stack, error) { return s.InsertAfter("cookies", pass("auth")) }, []string{"redirect", "cookies", "auth", "retry"}},
		{"select reorders", func(s middleware.Stack) (middleware.Stack, error) { return s.Select("retry", "redirect", "cookies") }, []string{"retry", "redirect", "cookies"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.edit(base)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Names()); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"redirect", "cookies", "retry"}, base.Names()); diff != "" {
				t.Errorf("edit changed the original stack (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStackEditErrors(t *testing.T) {
	s := mustStack(t, "redirect", "cookies", "retry")
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"swap unknown", second(s.Swap("cookies", "cache")), &middleware.LayerError{Name: "cache", Reason: "not in the stack: redirect → cookies → retry → transport"}},
		{"without unknown", second(s.Without("cache")), &middleware.LayerError{Name: "cache", Reason: "not in the stack: redirect → cookies → retry → transport"}},
		{"insert next to unknown", second(s.InsertBefore("cache", pass("x"))), &middleware.LayerError{Name: "cache", Reason: "not in the stack: redirect → cookies → retry → transport"}},
		{"insert duplicate", second(s.InsertAfter("retry", pass("cookies"))), &middleware.LayerError{Name: "cookies", Reason: "duplicate name"}},
		{"insert invalid", second(s.InsertAfter("retry", middleware.Layer{Name: "x"})), &middleware.LayerError{Name: "x", Reason: "nil Wrap"}},
		{"select unknown", second(s.Select("retry", "cache")), &middleware.LayerError{Name: "cache", Reason: "not in the stack: redirect → cookies → retry → transport"}},
		{"select the base", second(s.Select("retry", "transport")), &middleware.LayerError{Name: "transport", Reason: "is the base, not a layer, in redirect → cookies → retry → transport: it always stays innermost: name only layers"}},
		{"select leaves layers out", second(s.Select("retry", "redirect")), &middleware.LayerError{Name: "cookies", Reason: "left out of Select(retry, redirect), which only reorders the stack redirect → cookies → retry → transport: name every layer (cookies missing), or remove one with Without"}},
		{"insert before the base", second(s.InsertBefore("transport", pass("x"))), &middleware.LayerError{Name: "transport", Reason: `is the base, not a layer, in redirect → cookies → retry → transport: to place a layer just above it, use InsertAfter("retry", l)`}},
		{"insert after the base", second(s.InsertAfter("transport", pass("x"))), &middleware.LayerError{Name: "transport", Reason: "is the base, not a layer, in redirect → cookies → retry → transport: nothing goes below it: wrap the RoundTripper you pass to Then"}},
		{"remove the base", second(s.Without("transport")), &middleware.LayerError{Name: "transport", Reason: "is the base, not a layer, in redirect → cookies → retry → transport: it cannot be removed: pass another RoundTripper to Then"}},
		{"swap with the base", second(s.Swap("retry", "transport")), &middleware.LayerError{Name: "transport", Reason: "is the base, not a layer, in redirect → cookies → retry → transport: it always stays innermost: name only layers"}},
		{"select repeated", second(s.Select("retry", "retry")), &middleware.LayerError{Name: "retry", Reason: "duplicate name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.err); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
	var unknown *middleware.LayerError
	if _, err := s.Without("x"); !errors.As(err, &unknown) {
		t.Errorf("errors.As(%v, *LayerError) = false", err)
	}
}

func second(_ middleware.Stack, err error) error { return err }

func TestZeroStack(t *testing.T) {
	var s middleware.Stack
	if got, want := s.String(), "transport"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	base := &rttest.Base{}
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	resp, err := s.Then(base).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Calls() != 1 {
		t.Errorf("base calls = %d, want 1", base.Calls())
	}
}

// A layer built from RoundTripperFunc cannot forward CloseIdleConnections;
// the chain Then returns still reaches the base.
func TestThenForwardsCloseIdleConnections(t *testing.T) {
	opaque := middleware.Layer{Name: "opaque", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(next.RoundTrip)
	}}
	s, err := middleware.NewStack(opaque)
	if err != nil {
		t.Fatal(err)
	}
	rttest.Contract(t, func(base http.RoundTripper) http.RoundTripper { return s.Then(base) })
}

func TestThenNilBaseIsDefaultTransport(t *testing.T) {
	var got http.RoundTripper
	spy := middleware.Layer{Name: "spy", Wrap: func(next http.RoundTripper) http.RoundTripper { got = next; return next }}
	s, _ := middleware.NewStack(spy)
	s.Then(nil)
	// The innermost layer wraps the stack's send counter over the base.
	if c, ok := got.(operation.Counter); !ok || c.Base != http.DefaultTransport {
		t.Errorf("inner of the last layer = %#v, want the counter over http.DefaultTransport", got)
	}
}

// RoundTripperFunc values cannot be compared: closing idle connections on a
// stack over one must not panic.
func TestCloseIdleOverFuncBase(t *testing.T) {
	base := middleware.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("x") })
	for _, s := range []middleware.Stack{{}, mustStack(t, "a")} {
		rt := s.Then(base)
		rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	}
}

func TestUnknownLayerInEmptyStack(t *testing.T) {
	var s middleware.Stack
	_, err := s.Without("retry")
	if got, want := err.Error(), `middleware: layer "retry": not in the stack, which has no layers: transport`; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}
