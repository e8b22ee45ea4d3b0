package operation

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"testing"
)

func TestTraceAnsweredWhileTheOperationRuns(t *testing.T) {
	var callerConns int
	caller := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { callerConns++ },
	})
	req, _ := http.NewRequestWithContext(caller, "GET", "http://example.test/", nil)
	r, op := Start(req, true)
	if From(r.Context()) != op {
		t.Fatal("the request does not carry its operation")
	}
	tr := httptrace.ContextClientTrace(r.Context())
	if tr == nil || tr.GotConn == nil {
		t.Fatal("no trace under the operation's context")
	}
	tr.GotConn(httptrace.GotConnInfo{})
	if op.Trace().Conns() != 1 || callerConns != 1 {
		t.Fatalf("conns: operation %d, caller %d; want both 1 (the caller's trace composed)", op.Trace().Conns(), callerConns)
	}
	op.End()
	// A context the caller keeps (resp.Request's) reaches the caller's
	// trace only, never the operation's, which went back to its pool.
	tr = httptrace.ContextClientTrace(r.Context())
	if tr == nil {
		t.Fatal("the caller's trace is lost after the operation ended")
	}
	tr.GotConn(httptrace.GotConnInfo{})
	if callerConns != 2 || op.Trace().Conns() != 1 {
		t.Fatalf("after End: caller %d, operation %d; want 2 and 1", callerConns, op.Trace().Conns())
	}
	if From(r.Context()) != op {
		t.Fatal("the operation is lost after End (engine.ReportOf needs it)")
	}
}

// The transport finds the operation's trace through the request's
// context (httptrace.WithClientTrace's), and after End the context
// reaches the parent's values only: no trace that went back to its pool.
func TestTraceFoundThenForgotten(t *testing.T) {
	type k struct{}
	parent := context.WithValue(context.Background(), k{}, "v")
	req, _ := http.NewRequestWithContext(parent, "GET", "http://example.test/", nil)
	r, op := Start(req, true)
	tr := httptrace.ContextClientTrace(r.Context())
	if tr != op.Trace().Client() {
		t.Fatalf("the transport finds %p, want the operation's trace %p", tr, op.Trace().Client())
	}
	tr.GotConn(httptrace.GotConnInfo{})
	tr.WroteHeaders()
	if op.Trace().Conns() != 1 || !op.Trace().Wrote() {
		t.Fatalf("conns %d, wrote %v; want 1, true", op.Trace().Conns(), op.Trace().Wrote())
	}
	if r.Context().Value(k{}) != "v" {
		t.Fatal("the caller's values are lost")
	}
	op.End()
	if tr := httptrace.ContextClientTrace(r.Context()); tr != nil {
		t.Fatal("after End the context still reaches the operation's trace, back in its pool")
	}
	if raceDetector {
		return // the race detector's sync.Pool drops traces at random
	}
	allocs := testing.AllocsPerRun(100, func() {
		r, op := Start(req, true)
		_ = httptrace.ContextClientTrace(r.Context())
		op.End()
	})
	if allocs != 2 {
		t.Fatalf("starting an operation allocates %v times, want 2 (the operation with its request, and WithClientTrace's context)", allocs)
	}
}

func TestDetach(t *testing.T) {
	type k struct{}
	base := context.WithValue(context.Background(), k{}, "v")
	req, _ := http.NewRequestWithContext(base, "GET", "http://example.test/", nil)
	r, op := Start(req, true)
	defer op.End()
	d := Detach(r.Context())
	if From(&d) != nil {
		t.Fatal("a detached context still carries the operation")
	}
	if d.Value(k{}) != "v" {
		t.Fatal("a detached context lost its parent's values")
	}
	r2, op2 := Start(req.WithContext(&d), true)
	defer op2.End()
	if From(r2.Context()) != op2 || op2 == op {
		t.Fatal("a request under a detached context is not an operation of its own")
	}
}

// Observers are told in the order they were added, and one added while
// events are told (from a hedge's goroutine) neither races nor disturbs
// a reader.
func TestObservers(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	_, op := Start(req, true)
	defer op.End()
	if op.Observed() {
		t.Fatal("observed before any observer")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			op.EachObserver(func(any) {})
		}
	}()
	for i := range 5 {
		op.AddObserver(i)
	}
	<-done
	var got []int
	op.EachObserver(func(x any) { got = append(got, x.(int)) })
	if !op.Observed() || len(got) != 5 || got[0] != 0 || got[4] != 4 {
		t.Fatalf("observers %v, want 0..4 in order", got)
	}
}

// An operation started under a running one marks its sends beyond the
// first on that one's trace; under one that has ended (a request made
// with the context of a response it returned) it marks nothing: that
// trace went back to its pool, and may be another operation's now.
func TestNestedSendsMarkOnlyARunningOperation(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	outerReq, outer := Start(req, true)
	innerReq, inner := Start(req.WithContext(outerReq.Context()), true)
	if inner.outer != outer.Trace() {
		t.Fatal("an operation inside a running one does not know its trace")
	}
	inner.End()
	_ = innerReq
	outer.End()
	_, late := Start(req.WithContext(outerReq.Context()), true)
	defer late.End()
	if late.outer != nil {
		t.Fatal("an operation under an ended one holds its pooled trace")
	}
}
