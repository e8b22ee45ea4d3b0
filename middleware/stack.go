package middleware

import (
	"net/http"
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
	i, err := s.index(a)
	if err != nil {
		return Stack{}, err
	}
	j, err := s.index(b)
	if err != nil {
		return Stack{}, err
	}
	out := s.Layers()
	out[i], out[j] = out[j], out[i]
	return Stack{layers: out}, nil
}

// Without returns the stack without the named layer.
func (s Stack) Without(name string) (Stack, error) {
	i, err := s.index(name)
	if err != nil {
		return Stack{}, err
	}
	out := make([]Layer, 0, len(s.layers)-1)
	out = append(out, s.layers[:i]...)
	return Stack{layers: append(out, s.layers[i+1:]...)}, nil
}

// InsertBefore returns the stack with l placed just outside the named layer.
func (s Stack) InsertBefore(name string, l Layer) (Stack, error) {
	return s.insert(name, 0, l)
}

// InsertAfter returns the stack with l placed just inside the named layer.
func (s Stack) InsertAfter(name string, l Layer) (Stack, error) {
	return s.insert(name, 1, l)
}

// Select returns a stack of the named layers in the given order, dropping
// the others: Select("redirect", "retry", "cookies") moves cookies inside
// retry. Names may not repeat.
func (s Stack) Select(names ...string) (Stack, error) {
	out := make([]Layer, 0, len(names))
	for k, name := range names {
		i, err := s.index(name)
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
	return Stack{layers: out}, nil
}

func (s Stack) insert(name string, offset int, l Layer) (Stack, error) {
	i, err := s.index(name)
	if err != nil {
		return Stack{}, err
	}
	if err := validate(l); err != nil {
		return Stack{}, err
	}
	if _, err := s.index(l.Name); err == nil {
		return Stack{}, &LayerError{Name: l.Name, Reason: "duplicate name"}
	}
	at := i + offset
	out := make([]Layer, 0, len(s.layers)+1)
	out = append(out, s.layers[:at]...)
	out = append(out, l)
	return Stack{layers: append(out, s.layers[at:]...)}, nil
}

func (s Stack) index(name string) (int, error) {
	for i, l := range s.layers {
		if l.Name == name {
			return i, nil
		}
	}
	have := "the stack is empty"
	if len(s.layers) > 0 {
		have = "have " + strings.Join(s.Names(), ", ")
	}
	return -1, &LayerError{Name: name, Reason: "not in the stack (" + have + ")"}
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
