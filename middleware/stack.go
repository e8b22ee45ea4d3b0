package middleware

import (
	"net/http"
	"slices"
	"strings"

	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/internal/wire"
)

// A Layer is a named wrapper around the next RoundTripper.
//
// Wrap is called once per [Stack.Then] with the RoundTripper the layer
// delegates to; the RoundTripper it returns must obey the contract described
// in the package documentation and be safe for concurrent use.
type Layer struct {
	// Name identifies the layer in a stack: non-empty, unique within the
	// stack, free of commas and spaces, and not "transport" (the name
	// [Stack.String] gives the base).
	Name string
	Wrap func(next http.RoundTripper) http.RoundTripper

	// Err is set by a layer constructor given a bad argument: NewStack and
	// the Stack methods reject the layer with a [*LayerError] naming it,
	// so the mistake surfaces when the stack is built, never at request
	// time.
	Err error
}

// baseName is the name [Stack.String] gives the base RoundTripper, which
// no layer may take.
const baseName = "transport"

// A Stack is an ordered list of named layers, outermost first.
//
// A Stack is an immutable value: every method that changes the order returns
// a new Stack and leaves the receiver as it was, so one stack can be shared
// and varied by concurrent experiments. The zero Stack has no layers.
type Stack struct {
	layers []Layer
}

// NewStack returns a stack of layers, the first outermost. It returns an
// [*LayerError] for a layer without a usable name or Wrap function, one
// whose constructor failed, and one whose name is taken.
func NewStack(layers ...Layer) (Stack, error) {
	for i, l := range layers {
		if err := validate(l); err != nil {
			return Stack{}, err
		}
		for _, prev := range layers[:i] {
			if prev.Name == l.Name {
				return Stack{}, &LayerError{Name: l.Name, Reason: "duplicate name"}
			}
		}
	}
	return Stack{layers: append([]Layer(nil), layers...)}, nil
}

func validate(l Layer) error {
	switch {
	case l.Err != nil:
		return &LayerError{Name: l.Name, Reason: l.Err.Error(), Err: l.Err}
	case l.Name == "":
		return &LayerError{Name: l.Name, Reason: "empty name"}
	case l.Name == baseName:
		return &LayerError{Name: l.Name, Reason: "name reserved for the base"}
	case strings.ContainsAny(l.Name, ", \t\r\n"):
		return &LayerError{Name: l.Name, Reason: "name contains a comma or space"}
	case l.Wrap == nil:
		return &LayerError{Name: l.Name, Reason: "nil Wrap"}
	}
	return nil
}

// Layers returns a copy of the stack's layers, outermost first.
func (s Stack) Layers() []Layer { return append([]Layer(nil), s.layers...) }

// Names returns the layer names, outermost first.
func (s Stack) Names() []string {
	names := make([]string, len(s.layers))
	for i, l := range s.layers {
		names[i] = l.Name
	}
	return names
}

// String prints the order requests flow in, ending with the base, e.g.
// "redirect → cookies → retry → transport".
func (s Stack) String() string {
	return strings.Join(append(s.Names(), baseName), " → ")
}

// Then returns a RoundTripper that sends each request through the layers in
// order and finally through base (nil means [http.DefaultTransport]).
//
// Its CloseIdleConnections reaches the outermost layer and the base, so idle
// connections are closed even when a layer in between cannot forward the
// call. Then panics if a layer's Wrap returns nil: that layer is broken.
func (s Stack) Then(base http.RoundTripper) http.RoundTripper {
	base = wire.Base(base)
	var rt http.RoundTripper = operation.Counter{Base: base} // the one writer of the send count
	var starter operation.Starter
	for i := len(s.layers) - 1; i >= 0; i-- {
		rt = s.layers[i].Wrap(rt)
		if rt == nil {
			panic("middleware: layer " + s.layers[i].Name + " returned a nil RoundTripper")
		}
		if st, ok := rt.(operation.Starter); ok {
			starter = st // the outermost retry layer's state is allocated with the operation
		}
		if m, ok := rt.(operation.Member); ok {
			m.InStack()
		}
	}
	return &chain{top: rt, base: base, starter: starter, layered: len(s.layers) > 0, order: s.String()}
}

// Swap returns the stack with layers a and b exchanged.
func (s Stack) Swap(a, b string) (Stack, error) {
	i, err := s.index(a, opMove)
	if err != nil {
		return Stack{}, err
	}
	j, err := s.index(b, opMove)
	if err != nil {
		return Stack{}, err
	}
	out := s.Layers()
	out[i], out[j] = out[j], out[i]
	return Stack{layers: out}, nil
}

// Without returns the stack without the named layer.
func (s Stack) Without(name string) (Stack, error) {
	i, err := s.index(name, opRemove)
	if err != nil {
		return Stack{}, err
	}
	out := make([]Layer, 0, len(s.layers)-1)
	out = append(out, s.layers[:i]...)
	return Stack{layers: append(out, s.layers[i+1:]...)}, nil
}

// InsertBefore returns the stack with l placed just outside the named layer.
// To place a layer just above the base ("transport"), use InsertAfter with
// the innermost layer's name.
func (s Stack) InsertBefore(name string, l Layer) (Stack, error) {
	return s.insert(name, 0, l)
}

// InsertAfter returns the stack with l placed just inside the named layer.
func (s Stack) InsertAfter(name string, l Layer) (Stack, error) {
	return s.insert(name, 1, l)
}

// Select returns the stack's layers in the given order:
// Select("redirect", "retry", "cookies") moves cookies inside retry. Every
// layer of the stack must be named, once: Select never drops a layer (an
// "attempt-telemetry" left out would silently end the attempt spans), and
// a layer left out is a [*LayerError] naming it. To remove a layer, use
// [Stack.Without].
func (s Stack) Select(names ...string) (Stack, error) {
	out := make([]Layer, 0, len(names))
	for k, name := range names {
		i, err := s.index(name, opMove)
		if err != nil {
			return Stack{}, err
		}
		for _, prev := range names[:k] {
			if prev == name {
				return Stack{}, &LayerError{Name: name, Reason: "duplicate name"}
			}
		}
		out = append(out, s.layers[i])
	}
	if len(out) < len(s.layers) {
		var left []string
		for _, l := range s.layers {
			if !slices.Contains(names, l.Name) {
				left = append(left, l.Name)
			}
		}
		return Stack{}, &LayerError{Name: left[0], Reason: "left out of Select(" + strings.Join(names, ", ") +
			"), which only reorders the stack " + s.String() + ": name every layer (" + strings.Join(left, ", ") +
			" missing), or remove one with Without"}
	}
	return Stack{layers: out}, nil
}

func (s Stack) insert(name string, offset int, l Layer) (Stack, error) {
	op := opInsertBefore
	if offset == 1 {
		op = opInsertAfter
	}
	i, err := s.index(name, op)
	if err != nil {
		return Stack{}, err
	}
	if err := validate(l); err != nil {
		return Stack{}, err
	}
	if _, err := s.index(l.Name, opMove); err == nil {
		return Stack{}, &LayerError{Name: l.Name, Reason: "duplicate name"}
	}
	at := i + offset
	out := make([]Layer, 0, len(s.layers)+1)
	out = append(out, s.layers[:at]...)
	out = append(out, l)
	return Stack{layers: append(out, s.layers[at:]...)}, nil
}

// The stack operations, for index's errors.
const (
	opMove = iota
	opRemove
	opInsertBefore
	opInsertAfter
)

// index returns the position of the named layer, or an error that shows
// the stack the way String prints it and, for the base's name, what to do
// instead.
func (s Stack) index(name string, op int) (int, error) {
	for i, l := range s.layers {
		if l.Name == name {
			return i, nil
		}
	}
	if name != baseName {
		if len(s.layers) == 0 {
			return -1, &LayerError{Name: name, Reason: "not in the stack, which has no layers: " + s.String()}
		}
		return -1, &LayerError{Name: name, Reason: "not in the stack: " + s.String()}
	}
	reason := "is the base, not a layer, in " + s.String() + ": "
	switch {
	case op == opInsertBefore && len(s.layers) > 0:
		reason += "to place a layer just above it, use InsertAfter(\"" + s.layers[len(s.layers)-1].Name + "\", l)"
	case op == opInsertBefore:
		reason += "to place a layer above it, use NewStack(l)"
	case op == opInsertAfter:
		reason += "nothing goes below it: wrap the RoundTripper you pass to Then"
	case op == opRemove:
		reason += "it cannot be removed: pass another RoundTripper to Then"
	default:
		reason += "it always stays innermost: name only layers"
	}
	return -1, &LayerError{Name: name, Reason: reason}
}

// chain is what Then returns: the outermost RoundTripper plus the base, so
// CloseIdleConnections cannot be lost in a layer that does not forward it.
type chain struct {
	top, base http.RoundTripper
	starter   operation.Starter // nil: the stack starts its operations itself
	layered   bool              // top is a layer, not the base itself
	order     string
}

// RoundTrip sends req through the layers, as one logical operation that
// they share, its own even when req was made under another's. What
// comes out keeps the RoundTripper contract whatever a layer or the base
// returned (see the package documentation).
func (c *chain) RoundTrip(req *http.Request) (*http.Response, error) {
	var op *operation.Operation
	if c.starter != nil {
		req, op = c.starter.StartOperation(req)
	} else {
		req, op = operation.Start(req, true)
	}
	defer op.End()
	return wire.RoundTrip(c.top, req)
}

func (c *chain) CloseIdleConnections() {
	wire.CloseIdle(c.top)
	if c.layered {
		wire.CloseIdle(c.base) // harmless when the layers already forwarded it
	}
}

func (c *chain) String() string { return c.order }

// RoundTripperFunc adapts an ordinary function to [http.RoundTripper].
// It has no idle connections of its own.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f(req).
func (f RoundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
