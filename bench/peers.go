package bench

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/avast/retry-go/v4"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A Lib builds a client of one library over a transport, at the library's
// defaults but for what Mode changes.
type Lib struct {
	Name string
	New  func(tr http.RoundTripper, m Mode) (*http.Client, error)
}

// Mode is what a measurement changes in the libraries' defaults.
type Mode struct {
	// ZeroWait sets every wait between attempts to 0, so a run measures the
	// library, not its sleeping.
	ZeroWait bool
	// NoBudget switches retrystack's retry budget off, so every operation
	// of the retry-path benchmark makes all its attempts (the budget would
	// rightly stop retrying a server that fails two times in three).
	NoBudget bool
}

// recording is a tracer provider that samples every span and exports none.
var recording = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))

// Libs are the peers, in the order they print.
var Libs = []Lib{
	{"net/http", func(tr http.RoundTripper, _ Mode) (*http.Client, error) {
		return &http.Client{Transport: tr}, nil
	}},
	{"retrystack", func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		return retrystack.NewClient(retrystack.Config{Policy: defaultPolicy(m), Transport: tr})
	}},
	{"retrystack+otel", func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		tel, err := telemetry.New(telemetry.Config{TracerProvider: recording})
		if err != nil {
			return nil, err
		}
		return retrystack.NewClient(retrystack.Config{Policy: defaultPolicy(m), Transport: tr, Telemetry: tel})
	}},
	{"go-retryablehttp", func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		c := retryablehttp.NewClient()
		c.HTTPClient = &http.Client{Transport: tr}
		c.Logger = nil // it logs every attempt to stderr by default
		if m.ZeroWait {
			c.RetryWaitMin, c.RetryWaitMax = 0, 0
		}
		return c.StandardClient(), nil
	}},
	{"failsafe-go", func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		b := failsafehttp.NewRetryPolicyBuilder()
		if m.ZeroWait {
			b = b.WithDelay(0)
		}
		return &http.Client{Transport: failsafehttp.NewRoundTripper(tr, b.Build())}, nil
	}},
	{"retry-go", func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		return &http.Client{Transport: &retryGo{next: tr, zeroWait: m.ZeroWait}}, nil
	}},
	{"otelhttp", func(tr http.RoundTripper, _ Mode) (*http.Client, error) {
		return &http.Client{Transport: otelhttp.NewTransport(tr, otelhttp.WithTracerProvider(recording))}, nil
	}},
}

func defaultPolicy(m Mode) *policy.Policy {
	p := policy.Default()
	if m.ZeroWait {
		p.Backoff = policy.Backoff{}
	}
	if m.NoBudget {
		p.Budget = nil
	}
	return &p
}

// retryGo wraps avast/retry-go's Do around a RoundTrip, as its README
// suggests for HTTP: a 5xx is turned into an error to retry.
type retryGo struct {
	next     http.RoundTripper
	zeroWait bool
}

var errServer = errors.New("server error")

func (r *retryGo) RoundTrip(req *http.Request) (*http.Response, error) {
	opts := []retry.Option{retry.LastErrorOnly(true), retry.Context(req.Context())}
	if r.zeroWait {
		opts = append(opts, retry.Delay(0), retry.MaxJitter(0), retry.DelayType(retry.FixedDelay))
	}
	var last *http.Response
	err := retry.Do(func() error {
		attempt := req
		if last != nil && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return retry.Unrecoverable(err)
			}
			attempt = req.Clone(req.Context())
			attempt.Body = body
		}
		if last != nil { // drained, so its connection is reused
			io.Copy(io.Discard, last.Body)
			last.Body.Close()
			last = nil
		}
		resp, err := r.next.RoundTrip(attempt)
		if err != nil {
			return err
		}
		last = resp
		if resp.StatusCode >= 500 {
			return fmt.Errorf("%w: %d", errServer, resp.StatusCode)
		}
		return nil
	}, opts...)
	if last != nil && (err == nil || errors.Is(err, errServer)) {
		return last, nil // the last response, like the others
	}
	return nil, err
}

func (r *retryGo) CloseIdleConnections() {
	if c, ok := r.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
