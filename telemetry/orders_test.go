package telemetry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/policy"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// In every order of redirect, cookies and retry, a flow that both retries
// and redirects (503, then 302, then 200) numbers its physical sends in
// order — resend_count absent, 1, 2 — and the operation span counts the
// three sends the server saw.
func TestSendNumberingInEveryOrder(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/end":
		case n.Add(1) == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.Redirect(w, r, "/end", http.StatusFound)
		}
	}))
	defer srv.Close()
	for _, order := range permutations([]string{"redirect", "cookies", "retry"}) {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			n.Store(0)
			rec, tel := traced(t)
			p := policy.Default()
			p.Backoff.Base = time.Microsecond
			s, err := retrystack.NewStack(retrystack.Config{Policy: &p, Telemetry: tel, Cookies: cookiejar.Config{Jar: cookiejar.NewJar()}})
			if err != nil {
				t.Fatal(err)
			}
			if s, err = s.Select(append(append([]string{"telemetry"}, order...), "attempt-telemetry")...); err != nil {
				t.Fatal(err)
			}
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := retrystack.Client(s, tr).Get(srv.URL + "/start")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()

			spans := rec.Ended()
			slices.SortFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
			var resends []string
			attempts := ""
			for _, sp := range spans {
				switch sp.SpanKind() {
				case trace.SpanKindClient:
					v, ok := attr(sp, "http.request.resend_count")
					if !ok {
						v = "-"
					}
					resends = append(resends, v)
				case trace.SpanKindInternal:
					attempts, _ = attr(sp, "retrystack.attempts")
				}
			}
			if got := fmt.Sprint(resends); got != "[- 1 2]" {
				t.Errorf("resend_count of the attempt spans %s, want [- 1 2]", got)
			}
			if attempts != "3" {
				t.Errorf("operation span counts %s attempts, want the 3 sends", attempts)
			}
		})
	}
}

func permutations(s []string) [][]string {
	if len(s) <= 1 {
		return [][]string{slices.Clone(s)}
	}
	var out [][]string
	for i := range s {
		rest := slices.Concat(s[:i:i], s[i+1:])
		for _, p := range permutations(rest) {
			out = append(out, append([]string{s[i]}, p...))
		}
	}
	return out
}

// A stack inside another counts its own sends: NewClient over NewTransport
// sends twice on a 503 then 200, and each level reports what it did — the
// outer one send into the inner stack, the inner two sends on the wire.
func TestNestedStacksCountTheirOwn(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	rec, tel := traced(t)
	p := policy.Default()
	p.Backoff.Base = time.Microsecond
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	inner, err := retrystack.NewTransport(retrystack.Config{Policy: &p, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	outer, err := retrystack.NewClient(retrystack.Config{Policy: &p, Telemetry: tel, Transport: inner})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := outer.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var attempts []string
	for _, s := range rec.Ended() {
		if v, ok := attr(s, "retrystack.attempts"); ok {
			attempts = append(attempts, v)
		}
	}
	if fmt.Sprint(attempts) != "[1]" || n.Load() != 2 {
		t.Errorf("outer operation counted %v sends, the server saw %d; want [1] and 2", attempts, n.Load())
	}
}
