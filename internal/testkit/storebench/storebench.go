// Package storebench measures an idempotency store under
// idempotency.Handler: the memory store's benchmark and the Postgres
// store's (a module of its own, inside this repository) share it.
package storebench

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/idempotency"
)

// Benchmark measures idempotency.Handler over a store made by newStore,
// as a service sees it: distinct keys (each a claim, a run of the
// handler and a stored answer) and replays (one key, answered from the
// store), from GOMAXPROCS goroutines. It reports requests per second.
// write, when set, is the handler's own write (through a store's
// transaction, say).
func Benchmark(b *testing.B, newStore func(testing.TB) idempotency.Store, write func(r *http.Request) error) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if write != nil {
			if err := write(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"order":1}`))
	})
	run := strconv.FormatInt(time.Now().UnixNano(), 10)
	for _, mode := range []string{"distinct", "replay"} {
		b.Run(mode, func(b *testing.B) {
			h := idempotency.Handler(handler, idempotency.Config{Store: newStore(b)})
			var seq atomic.Int64
			base := run + "-" + strconv.Itoa(b.N) + "-" + mode
			send := func(key string) {
				req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"item":"book","quantity":1}`))
				req.Header.Set("Idempotency-Key", key)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
			if mode == "replay" {
				send(`"` + base + `"`) // stored before the replays begin
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := `"` + base + `"`
					if mode == "distinct" {
						key = `"` + base + "-" + strconv.FormatInt(seq.Add(1), 10) + `"`
					}
					send(key)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
