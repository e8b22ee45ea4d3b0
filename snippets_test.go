package retrystack_test

// The Go snippets of README.md and docs/*.md, each a region of an Example
// that builds and runs (TestDocSnippetsAreCompiledCode matches them to the
// docs). Each Example sets up what its snippet leaves out (a server, a
// URL) outside the region.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"golang.org/x/time/rate"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/examples/ratelimit"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/limit"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	"github.com/retrystack/retrystack/throttle"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func okServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
}

// README: a retrying transport under an SDK.
func Example_readmeTransport() {
	srv := okServer()
	defer srv.Close()
	// snippet: readme-transport
	rt, err := retrystack.NewTransport(retrystack.Config{}) // policy.Default() over http.DefaultTransport
	fmt.Println(rt)                                         // retry → transport
	httpClient := &http.Client{Transport: rt}               // for any SDK: github.NewClient(httpClient)
	// end snippet
	if err != nil {
		panic(err)
	}
	resp, err := httpClient.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(engine.ReportOf(resp))
	// Output:
	// retry → transport
	// default: 1 attempts [200], waits [], success
}

// README: the whole client, and its reports.
func Example_readmeClient() {
	srv := okServer()
	defer srv.Close()
	url := srv.URL
	// snippet: readme-client
	client, err := retrystack.NewClient(retrystack.Config{
		Cookies: cookiejar.Config{Jar: cookiejar.NewJar()}, // opt-in: the zero Config keeps no cookies
	})
	fmt.Println(client.Transport) // redirect → cookies → retry → transport

	resp, err := client.Get(url)
	if err != nil {
		fmt.Println(engine.ReportFrom(err)) // attempts, statuses, planned waits, stop reason, pitfalls
		return
	}
	defer resp.Body.Close()
	fmt.Println(engine.ReportOf(resp)) // the same for a response (of the last redirect hop; hooks see every hop)
	// end snippet
	// Output:
	// redirect → cookies → retry → transport
	// default: 1 attempts [200], waits [], success
}

// README: the pieces, rearranged.
func Example_readmeStack() {
	// snippet: readme-stack
	p := policy.Default()        // idempotent or keyed requests only; 408/425/429/5xx; full jitter; 20 % budget
	p.Timeout = 10 * time.Second // one deadline for attempts, waits and the final body read
	jar := cookiejar.Config{Jar: cookiejar.NewJar()}
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p, Cookies: jar}) // a bad policy is a *policy.ConfigError here
	stack, err = stack.Swap("cookies", "retry")                                    // a new stack: every attempt's Set-Cookie is kept
	stack, err = stack.InsertBefore("redirect", middleware.ErrorForStatus(0))      // a final 4xx/5xx becomes an error
	client := retrystack.Client(stack, nil)                                        // own CheckRedirect and Jar off
	// end snippet
	fmt.Println(err, client.Transport)
	// Output:
	// <nil> error-for-status → redirect → retry → cookies → transport
}

// README: retries at one layer of a chain of services.
func Example_readmeCrossLayer() {
	pricing := okServer()
	defer pricing.Close()
	pricingURL := pricing.URL
	mux := http.NewServeMux()
	// snippet: readme-crosslayer
	// One line turns the protocol on, for the hosts of your own services only:
	// S3, Stripe or any third party gets none of its headers, and cannot stop
	// your retries with one.
	client, _ := retrystack.NewClient(retrystack.Config{Signals: crosslayer.Signals{
		To: &policy.Scope{Hosts: []string{"pricing.internal", "stock.internal"}}}})
	mux.Handle("/quote", crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", pricingURL, nil) // the caller's deadline, carried on
		resp, err := client.Do(req)                                               // retries here; gives up with "do not retry" for the caller above
		if err != nil {
			http.Error(w, "no price", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}), crosslayer.Config{MaxTimeout: 5 * time.Second}))
	// end snippet
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/quote", nil))
	fmt.Println(rec.Code, rec.Body)
	// Output:
	// 200 ok
}

// README: circuit breaking, hedging and throttling, inside the retry layer.
func Example_readmeLayers() {
	stack, _ := retrystack.NewStack(retrystack.Config{})
	// snippet: readme-breaker-hedge
	stack, _ = stack.InsertAfter("retry", breaker.Layer(breaker.Config{}))                           // counts attempts; opens after 5 failures
	stack, _ = stack.InsertAfter("breaker", hedge.Layer(hedge.Config{Delay: 50 * time.Millisecond})) // hedges share the retry budget
	// end snippet
	// snippet: readme-throttle
	stack, _ = stack.InsertAfter("retry", throttle.Layer(throttle.Config{})) // K 2, a 2-minute window
	// end snippet
	// snippet: readme-limit
	stack, _ = stack.InsertAfter("hedge", limit.Layer(limit.Config{Limit: 32, Adaptive: true})) // below the hedge: its sends count
	// end snippet
	fmt.Println(stack)
	// Output:
	// redirect → cookies → retry → throttle → breaker → hedge → limit → transport
}

// README: safe writes, the client and the server halves.
func Example_readmeSafeWrites() {
	var written int
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { written++; w.WriteHeader(http.StatusCreated) })
	store := idempotency.NewMemoryStore(0, nil)
	accountOf := func(*http.Request) string { return "acct-1" }
	mux := http.NewServeMux()
	// snippet: readme-safe-writes
	p := policy.Default()
	p.IdempotencyKeys, p.Timeout = true, 10*time.Second                   // client: keyed POSTs are retried
	mux.Handle("/orders", idempotency.Handler(orders, idempotency.Config{ // server
		Store:     store,                                                // postgres.New(ctx, pool, "idempotency_keys")
		Principal: func(r *http.Request) string { return accountOf(r) }, // keys scoped per account
	}))
	// end snippet
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client, _ := retrystack.NewClient(retrystack.Config{Policy: &p})
	resp, err := client.Post(srv.URL+"/orders", "text/plain", nil)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, written)
	// Output:
	// 201 1
}

// README: a layer of your own, examples/ratelimit.
func Example_readmeRateLimit() {
	srv := okServer()
	defer srv.Close()
	url := srv.URL
	// snippet: readme-ratelimit
	stack, _ := retrystack.NewStack(retrystack.Config{})
	stack, _ = stack.InsertAfter("retry", ratelimit.Layer(rate.Every(time.Second), 5))
	resp, err := retrystack.Client(stack, nil).Get(url)
	if err != nil {
		fmt.Println(engine.ReportFrom(err).Stop) // "rate-limited" when a retry found no token and nothing to borrow
		return
	}
	defer resp.Body.Close()
	// end snippet
	fmt.Println(stack, resp.StatusCode)
	// Output:
	// redirect → cookies → retry → ratelimit → transport 200
}

// docs/architecture.md: a stack's edits.
func Example_architectureStackEdits() {
	stack, _ := retrystack.NewStack(retrystack.Config{})
	attemptLog := middleware.Layer{Name: "attempt-log", Wrap: func(next http.RoundTripper) http.RoundTripper { return next }}
	// snippet: architecture-stack-edits
	fmt.Println(stack)                                             // redirect → cookies → retry → transport
	swapped, err := stack.Swap("cookies", "retry")                 // cookies inside retry: no Set-Cookie is lost
	fewer, err := stack.Without("redirect")                        // cookies → retry → transport
	logged, err := stack.InsertAfter("retry", attemptLog)          // redirect → cookies → retry → attempt-log → transport
	reordered, err := stack.Select("redirect", "retry", "cookies") // a new order; every layer named
	// end snippet
	fmt.Println(swapped, "|", fewer, "|", logged, "|", reordered, "|", err)
	// Output:
	// redirect → cookies → retry → transport
	// redirect → retry → cookies → transport | cookies → retry → transport | redirect → cookies → retry → attempt-log → transport | redirect → retry → cookies → transport | <nil>
}

// docs/safe-writes.md: keys per principal.
func Example_safeWritesPrincipal() {
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	store := idempotency.NewMemoryStore(0, nil)
	accountOf := func(ctx context.Context) string { return "acct-1" }
	// snippet: safe-writes-principal
	handler := idempotency.Handler(orders, idempotency.Config{
		Store: store,
		// The account an API key belongs to, as the authentication
		// middleware in front of this handler found it: never the secret.
		Principal: func(r *http.Request) string { return accountOf(r.Context()) },
	})
	// end snippet
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/orders", nil)
	req.Header.Set("Idempotency-Key", `"k1"`)
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// 201
}

// docs/telemetry.md: telemetry in the whole client.
func Example_telemetryConfig() {
	tp := sdktrace.NewTracerProvider()
	mp := sdkmetric.NewMeterProvider()
	// snippet: telemetry-config
	tel, err := telemetry.New(telemetry.Config{
		TracerProvider: tp,                         // nil: the global provider
		MeterProvider:  mp,                         // nil: the global provider
		Propagator:     propagation.TraceContext{}, // the default
	})
	client, err := retrystack.NewClient(retrystack.Config{Telemetry: tel})
	fmt.Println(client.Transport) // telemetry → redirect → cookies → retry → attempt-telemetry → transport
	// end snippet
	fmt.Println(err)
	// Output:
	// telemetry → redirect → cookies → retry → attempt-telemetry → transport
	// <nil>
}
