package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/limit"
)

// limitRows put a concurrency limit inside the retry layer: a bulkhead per
// host, and a refusal that names its cause at the deadline.
var limitRows = []scenario{
	{
		id:     "limit/bulkhead-per-host",
		setup:  "a concurrency-limit layer of 4 requests in flight per host below the retry layer; 20 concurrent GETs to one server that takes 100 ms to answer. extra max_in_flight: the most requests the server held at once",
		preset: "default", stack: []string{"redirect", "cookies", "retry", "limit"},
		limit: func(*trial) limit.Config { return limit.Config{Limit: 4} },
		run: func(t *trial) {
			var in, most atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := in.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				select { // the service's 100 ms
				case <-time.After(100 * time.Millisecond):
				case <-r.Context().Done():
				}
				in.Add(-1)
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			ops := make([]op, 20)
			var wg sync.WaitGroup
			for i := range ops {
				wg.Go(func() { ops[i] = t.measureURL(srv.URL + "/" + strconv.Itoa(i)) })
			}
			wg.Wait()
			t.ops = append(t.ops, ops...)
			t.extra["max_in_flight"] = strconv.Itoa(int(most.Load()))
		},
		want: expect{"-", "200", "success", "max_in_flight=4"},
	},
	{
		id:     "limit/refused-at-deadline",
		setup:  "the same layer with a limit of 1; one GET holds the slot for 1 s while a second GET with a 200 ms deadline waits for it (the subject is the second): refused without being sent, with the limiter's own stop reason",
		preset: "default", stack: []string{"redirect", "cookies", "retry", "limit"},
		limit: func(*trial) limit.Config { return limit.Config{Limit: 1} },
		run: func(t *trial) {
			arrived, second := make(chan struct{}), make(chan struct{})
			var waiterSeen atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/hold" {
					waiterSeen.Add(1)
					return
				}
				close(arrived)
				select { // holds the slot for 1 s, or until the second is done
				case <-time.After(time.Second):
				case <-second:
				case <-r.Context().Done():
				}
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			first := make(chan op, 1) // the holder
			go func() { first <- t.measureURL(srv.URL + "/hold") }()
			select {
			case <-arrived:
			case <-t.ctx.Done():
			}
			ctx, cancel := context.WithTimeout(t.ctx, 200*time.Millisecond)
			status, _, rep, err := t.requestTo(ctx, http.MethodGet, srv.URL+"/waiter", nil)
			cancel()
			close(second)
			o := op{report: rep, result: strconv.Itoa(status)}
			if err != nil {
				o.result = "error"
			}
			<-first // it set the scene
			o.requests = int(waiterSeen.Load())
			t.ops = append(t.ops, o)
		},
		want: expect{"0", "error", "concurrency-limited", "-"},
	},
}

// chaosRows inject faults below the retry layer: the retry layer meets
// them as it would real ones.
var chaosRows = []scenario{
	{
		id:     "chaos/status-below-retry",
		setup:  "a fault-injection layer below the retry layer that answers the first attempt of each operation with an injected 503 (nothing sent), policy.Default(); 10 GETs to a healthy server. extra sent_per_op: what the server received per operation; attempts_per_op: what each report counts",
		preset: "default", stack: []string{"redirect", "cookies", "retry", "chaos"},
		chaos: func(*trial) chaos.Config {
			return chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Status, Status: http.StatusServiceUnavailable, Rate: 1, Attempts: 1}}}
		},
		run: func(t *trial) {
			for range 10 {
				t.send("GET", "/s/200", "")
			}
			sent, attempts := map[int]bool{}, map[int]bool{}
			for _, o := range t.ops {
				sent[o.requests] = true
				if o.report != nil {
					attempts[len(o.report.Attempts)] = true
				}
			}
			t.extra["sent_per_op"] = oneFigure(sent)
			t.extra["attempts_per_op"] = oneFigure(attempts)
		},
		want: expect{"1,1,1,1,1,1,1,1,1,1", "200", "success", "sent_per_op=1;attempts_per_op=2"},
	},
	{
		id:     "chaos/reset-after-send-post",
		setup:  "a fault-injection layer below the retry layer that sends a POST without an Idempotency-Key, then replaces its answer with a connection reset (the server processed it); policy.Default()",
		preset: "default", stack: []string{"redirect", "cookies", "retry", "chaos"},
		chaos: func(*trial) chaos.Config {
			return chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Reset, Rate: 1, Methods: []string{http.MethodPost}}}}
		},
		run:  func(t *trial) { t.send("POST", "/s/200", `{"item":1}`) },
		want: expect{"1", "error", "not-idempotent", "-"},
	},
}

// oneFigure is the one value of a set of figures, or "varies".
func oneFigure(set map[int]bool) string {
	if len(set) != 1 {
		return "varies"
	}
	for v := range set {
		return strconv.Itoa(v)
	}
	return ""
}
