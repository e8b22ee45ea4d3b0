package retrystack_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	rscookies "github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/policy"
)

// slowBase answers after its delay, recording each request's
// Idempotency-Key; it sets a cookie.
type slowBase struct {
	delay time.Duration
	mu    sync.Mutex
	keys  map[string]int
}

func (b *slowBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.keys[req.Header.Get("Idempotency-Key")]++
	b.mu.Unlock()
	select {
	case <-time.After(b.delay):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{"Set-Cookie": {"s=1"}}, Request: req}, nil
}

// A hedge above the retry layer runs a retry layer per send, at once: the
// operation's deadline and idempotency key are made once and shared (no
// race, one key); cookies below a hedge swap their observer without a race
// and leave none installed. Run with -race.
func TestHedgeAboveTheLayersBelowIt(t *testing.T) {
	p := policy.Default()
	p.Timeout, p.IdempotencyKeys, p.Budget = 2*time.Second, true, nil
	jar, _ := cookiejar.New(nil)
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p, Cookies: rscookies.Config{Jar: jar}})
	if err == nil {
		stack, err = stack.Select("redirect", "retry", "cookies")
	}
	if err == nil {
		stack, err = stack.InsertBefore("retry", hedge.Layer(hedge.Config{Delay: time.Millisecond, MaxHedges: 3,
			Safe: func(*http.Request) bool { return true }}))
	}
	if err != nil {
		t.Fatal(err)
	}
	base := &slowBase{delay: 20 * time.Millisecond, keys: map[string]int{}}
	client := retrystack.Client(stack, base)
	for range 3 {
		base.mu.Lock()
		clear(base.keys)
		base.mu.Unlock()
		req, _ := http.NewRequest("POST", "http://svc.test/orders", strings.NewReader("x"))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		base.mu.Lock()
		if len(base.keys) != 1 || base.keys[""] != 0 {
			t.Errorf("keys sent %v: want one key for every send of the operation", base.keys)
		}
		base.mu.Unlock()
	}
}
