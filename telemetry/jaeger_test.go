//go:build jaeger

package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// jaegerTrace is the part of Jaeger's /api/traces answer the test reads.
type jaegerTrace struct {
	Spans []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
		Logs []struct {
			Fields []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"fields"`
		} `json:"logs"`
	} `json:"spans"`
}

// summary is what the test checks of one scenario's trace.
type summary struct {
	Operations []string // logical spans, by name, sorted
	Attempts   int      // CLIENT spans, each a child of a logical span
	Resends    []string // http.request.resend_count of each attempt, "-" when absent
	Events     []string // backoff and pitfall events on the logical spans
}

// TestJaegerTraces reads what scripts/jaeger-e2e.sh exported through the
// lab and checks each scenario's trace as Jaeger stored it.
func TestJaegerTraces(t *testing.T) {
	query := os.Getenv("JAEGER_QUERY")
	if query == "" {
		t.Fatal("JAEGER_QUERY is not set: run scripts/jaeger-e2e.sh")
	}
	// Each retry throws a response away first (retrystack.response.discarded).
	const d = "retrystack.response.discarded"
	want := map[string]summary{
		"retrylab seed004/503-503-200": {Operations: []string{"retrystack GET"}, Attempts: 3, Resends: []string{"-", "1", "2"},
			Events: []string{d, "retrystack.retry.backoff", d, "retrystack.retry.backoff"}},
		"retrylab seed003/naive-post-orders": {Operations: []string{"retrystack POST"}, Attempts: 3, Resends: []string{"-", "1", "2"},
			Events: []string{"retrystack.pitfall non-idempotent-retried", d, "retrystack.retry.backoff",
				"retrystack.pitfall non-idempotent-retried", d, "retrystack.retry.backoff", "retrystack.pitfall exhausted-retryable-status", "retrystack.give_up"}},
		"retrylab seed003/naive-login-then-me": {Operations: []string{"retrystack GET", "retrystack POST"}, Attempts: 3, Resends: []string{"-", "-", "1"},
			Events: []string{"retrystack.pitfall non-idempotent-retried", d, "retrystack.pitfall cookie-lost", "retrystack.retry.backoff"}},
		"retrylab seed000/forhost-localhost-get-127": {Operations: []string{"retrystack GET"}, Attempts: 2, Resends: []string{"-", "1"},
			Events: []string{"retrystack.pitfall scope-leak", d, "retrystack.retry.backoff", "retrystack.pitfall exhausted-retryable-status", "retrystack.give_up"}},
	}
	var got map[string]summary
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = fetch(t, query)
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // spans land 100-200 ms after a flush
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("traces in Jaeger (-want +got):\n%s", diff)
	}
}

func fetch(t *testing.T, query string) map[string]summary {
	t.Helper()
	body := traces(t, query+"/api/traces?service=retrylab&limit=100&lookback=1h")
	out := map[string]summary{}
	for _, tr := range body.Data {
		byID := map[string]int{}
		root := ""
		for i, s := range tr.Spans {
			byID[s.SpanID] = i
			if len(s.References) == 0 {
				root = s.OperationName
			}
		}
		var sum summary
		type attempt struct{ parent, resend string }
		for _, s := range tr.Spans {
			tags := map[string]any{}
			for _, tg := range s.Tags {
				tags[tg.Key] = tg.Value
			}
			switch {
			case tags["span.kind"] == "internal" && len(s.References) > 0: // not the scenario's root
				sum.Operations = append(sum.Operations, s.OperationName)
				for _, l := range s.Logs {
					ev := ""
					for _, f := range l.Fields {
						switch f.Key {
						case "event":
							ev = f.Value.(string) + ev
						case "retrystack.pitfall.name":
							ev += " " + f.Value.(string)
						}
					}
					sum.Events = append(sum.Events, ev)
				}
			case tags["span.kind"] == "client":
				parent := tr.Spans[byID[s.References[0].SpanID]]
				if parent.OperationName == root || len(parent.References) == 0 {
					t.Errorf("%s: attempt span %s is not under a logical span", root, s.SpanID)
				}
				sum.Attempts++
				r := "-"
				if v, ok := tags["http.request.resend_count"]; ok {
					r = jsonNumber(v)
				}
				sum.Resends = append(sum.Resends, r)
			}
		}
		slices.Sort(sum.Resends)
		slices.Sort(sum.Operations)
		out[root] = sum
	}
	return out
}

// traces asks Jaeger's query API, on a connection closed afterwards (the
// package's goleak check sees no idle one).
func traces(t *testing.T, url string) (body struct{ Data []jaegerTrace }) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestJaegerBodyFailureAndUnknownMethod sends, through a traced stack that
// exports to the Jaeger scripts/jaeger-e2e.sh started, a PURGE and a GET
// whose body is reset halfway, and checks how Jaeger stored them: names,
// methods, statuses and error types.
func TestJaegerBodyFailureAndUnknownMethod(t *testing.T) {
	query, endpoint := os.Getenv("JAEGER_QUERY"), os.Getenv("JAEGER_OTLP")
	if query == "" || endpoint == "" {
		t.Fatal("JAEGER_QUERY and JAEGER_OTLP are not set: run scripts/jaeger-e2e.sh")
	}
	service := fmt.Sprintf("retrystack-e2e-%d", time.Now().UnixNano())
	// The exporter's own transport, so its connection can be closed.
	exportTr := &http.Transport{}
	defer exportTr.CloseIdleConnections()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: exportTr}))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := retrystack.NewClient(retrystack.Config{Telemetry: tel, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PURGE", srv.URL()+"/echo", nil)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
	}
	if resp, err := c.Get(srv.URL() + "/truncated?reset=1"); err == nil {
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err := tp.Shutdown(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}

	type spanSummary struct{ Name, Method, Original, Stop, ErrorType, Error string }
	var got []spanSummary
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 4 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // spans land 100-200 ms after a flush
		got = nil
		body := traces(t, query+"/api/traces?service="+service+"&limit=10&lookback=1h")
		for _, tr := range body.Data {
			for _, s := range tr.Spans {
				tags := map[string]string{}
				for _, tg := range s.Tags {
					tags[tg.Key] = fmt.Sprint(tg.Value)
				}
				got = append(got, spanSummary{s.OperationName, tags["http.request.method"], tags["http.request.method_original"],
					tags["retrystack.stop_reason"], tags["error.type"], tags["otel.status_code"]})
			}
		}
	}
	slices.SortFunc(got, func(a, b spanSummary) int { return strings.Compare(a.Name+a.Stop, b.Name+b.Stop) })
	want := []spanSummary{
		{Name: "GET", Method: "GET", ErrorType: "reset", Error: "ERROR"},
		{Name: "HTTP", Method: "_OTHER", Original: "PURGE"},
		{Name: "retrystack GET", Method: "GET", Stop: "body-failed", ErrorType: "reset", Error: "ERROR"},
		{Name: "retrystack HTTP", Method: "_OTHER", Original: "PURGE", Stop: "success"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans in Jaeger (-want +got):\n%s", diff)
	}
}
