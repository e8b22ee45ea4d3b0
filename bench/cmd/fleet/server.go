package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/overload"
)

// The server role: one HTTP/1.1 server on 127.0.0.1 for every client
// process of a cell, with the experiment's three services on three paths
// and the coordinator's controls under /control/.
//
//   - /work: the overload model of the in-process experiment
//     (overload.Service, serviceWorkers workers of serviceTime: 1 000
//     requests a second), FIFO. A request whose client hung up
//     (its attempt timed out) keeps its place and its worker's time: the
//     model counts that work as wasted, as the in-process one does.
//   - /flaky: a healthy service; each request, from a seeded generator,
//     stalls until its client gives up (5 %), is answered 503 (5 %), or
//     200.
//   - /quota: a rate limit of the whole fleet, -quota requests a second
//     (1 s windows); the request that exceeds it, and every request for
//     the -quota-hold after it, is answered 429 with Retry-After.
//
// Controls: POST /control/capacity?f=0.4; POST
// /control/schedule?start=<Unix ns>&warmup=3s&trigger=1s&f=0.4 (the
// trigger, timed by the server itself on the wall clock the client
// processes share); GET /control/stats; GET /control/quota.

// The in-process experiment's service (bench/metastable.go's metaWorkers
// and metaService): 150 workers of 150 ms, 1 000 requests a second.
const (
	serviceWorkers = 150
	serviceTime    = 150 * time.Millisecond
)

// server is the server role's state.
type server struct {
	svc      *overload.Service
	requests atomic.Int64 // every request of /work, /flaky and /quota
	served   atomic.Int64 // /work requests answered 200
	// atTrigger and atIncidentEnd are requests when the trigger started
	// and overload.IncidentSpan after it ended; -1 until then.
	atTrigger, atIncidentEnd atomic.Int64

	flakyMu sync.Mutex
	rnd     *rand.Rand

	quota, quotaHold int
	quotaMu          sync.Mutex
	window           int64 // the current 1 s window (Unix s) and its requests
	inWindow         int
	until            int64    // the current hold's end (Unix ns)
	log              quotaLog // the first hold's, and every request's time
}

func serverMain(args []string) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	seed := fs.Uint64("seed", 1, "seed of /flaky's answers")
	quota := fs.Int("quota", 10, "requests a second /quota allows the whole fleet")
	hold := fs.Int("quota-hold", 10, "seconds /quota answers 429 once exceeded (its Retry-After)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log.SetPrefix("fleet server: ")
	s := &server{svc: overload.NewService(serviceWorkers, serviceTime), rnd: rand.New(rand.NewPCG(*seed, *seed)), quota: *quota, quotaHold: *hold}
	s.atTrigger.Store(-1)
	s.atIncidentEnd.Store(-1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Print(err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(message{Type: "addr", Addr: l.Addr().String()})
	go exitWithStdin()
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	log.Print(srv.Serve(l))
	return 1
}

// exitWithStdin ends the process once its stdin closes: the coordinator
// has gone, or is done with it.
func exitWithStdin() {
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/work", s.work)
	mux.HandleFunc("/flaky", s.flaky)
	mux.HandleFunc("/quota", s.quotaHandler)
	mux.HandleFunc("POST /control/capacity", func(w http.ResponseWriter, r *http.Request) {
		f, err := strconv.ParseFloat(r.URL.Query().Get("f"), 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.svc.SetCapacity(f)
	})
	mux.HandleFunc("POST /control/schedule", s.schedule)
	mux.HandleFunc("GET /control/stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(serverStats{Requests: s.requests.Load(), Served: s.served.Load(), Wasted: s.svc.Wasted(),
			AtTrigger: s.atTrigger.Load(), AtIncidentEnd: s.atIncidentEnd.Load()})
	})
	mux.HandleFunc("GET /control/quota", func(w http.ResponseWriter, r *http.Request) {
		s.quotaMu.Lock()
		defer s.quotaMu.Unlock()
		json.NewEncoder(w).Encode(s.log)
	})
	return mux
}

// work is the overload model: the request waits in the service's queue
// for a worker; if its client hangs up first, the handler returns (the
// connection is gone) and the work stays queued, to be done for no one.
func (s *server) work(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://service.test/", nil)
	resp, err := s.svc.RoundTrip(req)
	if err != nil {
		if r.Context().Err() == nil { // the queue is full: never at these rates
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
		return
	}
	resp.Body.Close()
	s.served.Add(1)
	io.WriteString(w, "ok")
}

// flaky stalls 5 % of requests until their client gives up (a minute at
// most), answers 503 to 5 %, and 200 to the others.
func (s *server) flaky(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.flakyMu.Lock()
	x := s.rnd.Float64()
	s.flakyMu.Unlock()
	switch {
	case x < 0.05:
		t := time.NewTimer(time.Minute)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
		}
	case x < 0.10:
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	default:
		io.WriteString(w, "ok")
	}
}

// quotaHandler counts the fleet's requests in 1 s windows; the request
// past the quota starts a hold of quotaHold seconds, during which every
// request is answered 429 with Retry-After (the hold is not extended by
// them). It records when every request arrived.
func (s *server) quotaHandler(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	now := time.Now().UnixNano()
	s.quotaMu.Lock()
	s.log.Times = append(s.log.Times, now)
	refuse := now < s.until
	if !refuse {
		if win := now / int64(time.Second); win != s.window {
			s.window, s.inWindow = win, 0
		}
		s.inWindow++
		if s.inWindow > s.quota {
			refuse = true
			s.until = now + int64(s.quotaHold)*int64(time.Second)
			if s.log.First429 == 0 {
				s.log.First429, s.log.Until = now, s.until
			}
			s.window, s.inWindow = 0, 0
		}
	}
	s.quotaMu.Unlock()
	if refuse {
		w.Header().Set("Retry-After", strconv.Itoa(s.quotaHold))
		http.Error(w, "quota exceeded", http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok")
}

// schedule runs the trigger: capacity f from start+warmup for trigger,
// and records the requests counter at its start and IncidentSpan after
// its end.
func (s *server) schedule(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	start, err1 := strconv.ParseInt(q.Get("start"), 10, 64)
	warmup, err2 := time.ParseDuration(q.Get("warmup"))
	trigger, err3 := time.ParseDuration(q.Get("trigger"))
	f, err4 := strconv.ParseFloat(q.Get("f"), 64)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	at := time.Unix(0, start).Add(warmup)
	time.AfterFunc(time.Until(at), func() {
		s.atTrigger.Store(s.requests.Load())
		s.svc.SetCapacity(f)
	})
	time.AfterFunc(time.Until(at.Add(trigger)), func() { s.svc.SetCapacity(1) })
	time.AfterFunc(time.Until(at.Add(trigger+overload.IncidentSpan)), func() { s.atIncidentEnd.Store(s.requests.Load()) })
	fmt.Fprintf(w, "trigger at %s for %s at %.0f %%\n", at.Format(time.RFC3339Nano), trigger, f*100)
}
