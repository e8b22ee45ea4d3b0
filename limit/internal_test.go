package limit

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// until polls cond, yielding, until it holds: the test waits on the
// limiter's state, not on a clock.
func until(t *testing.T, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); runtime.Gosched() {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the condition never held")
		}
	}
}

func (k *key) waiting() (firsts, retries int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.firsts.len(), k.retries.len()
}

// Room that frees goes to a first attempt before a retry that has waited
// longer, and to the retry when no first attempt waits.
func TestRetriesWaitBehindFirstAttempts(t *testing.T) {
	l, err := New(Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k, held, err := l.acquire(ctx, "a", false)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	go func() {
		k, adm, err := l.acquire(ctx, "a", true)
		if err == nil {
			got <- "retry"
			l.release(k, adm, false)
		}
	}()
	until(t, func() bool { _, r := k.waiting(); return r == 1 })
	firstDone := make(chan struct{})
	go func() {
		k, adm, err := l.acquire(ctx, "a", false)
		if err == nil {
			got <- "first"
			<-firstDone
			l.release(k, adm, false)
		}
	}()
	until(t, func() bool { f, _ := k.waiting(); return f == 1 })
	// A new retry with room free and someone waiting does not jump the
	// queue; nor does a new first attempt.
	l.release(k, held, false)
	if w := <-got; w != "first" {
		t.Fatalf("room went to the %s; want the first attempt", w)
	}
	close(firstDone)
	if w := <-got; w != "retry" {
		t.Fatalf("then to the %s; want the retry", w)
	}
	until(t, func() bool { k.mu.Lock(); defer k.mu.Unlock(); return k.inflight == 0 })
}

// The limiter keeps at most MaxKeys keys, plus those in use.
func TestKeysAreBounded(t *testing.T) {
	l, err := New(Config{Limit: 1, MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k0, held, _ := l.acquire(ctx, "in-use", false)
	for i := range 10_000 {
		k, adm, err := l.acquire(ctx, fmt.Sprint("host", i), false)
		if err != nil {
			t.Fatal(err)
		}
		l.release(k, adm, false)
		if n := l.keys.Len(); n > 100 {
			t.Fatalf("%d keys after %d hosts; want at most 100", n, i+1)
		}
	}
	if k, _ := l.keys.Load("in-use"); k != k0 {
		t.Fatal("a key in use was forgotten")
	}
	// It still holds its one place.
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if _, _, err := l.acquire(short, "in-use", false); err == nil {
		t.Fatal("a second request passed a forgotten key's limit")
	}
	l.release(k0, held, false)
}

// Answers and timeouts are latency samples; overload answers, other
// failures and cancellations are not.
func TestSample(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://a.example/", nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		req    *http.Request
		status int
		err    error
		want   bool
	}{
		{req, 200, nil, true},
		{req, 500, nil, true},
		{req, 429, nil, false},
		{req, 503, nil, false},
		{req, 0, context.DeadlineExceeded, true},
		{req, 0, syscall.ECONNREFUSED, false},
		{req.WithContext(cancelled), 0, context.DeadlineExceeded, false},
		{req, 0, context.Canceled, false},
	} {
		var resp *http.Response
		if tc.err == nil {
			resp = &http.Response{StatusCode: tc.status}
		}
		if got := sample(tc.req, resp, tc.err); got != tc.want {
			t.Errorf("%d %v: sample %v, want %v", tc.status, tc.err, got, tc.want)
		}
	}
}
