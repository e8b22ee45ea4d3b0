package policy_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/policy"
)

// FuzzClassify gives every preset's classifier arbitrary statuses, methods,
// headers and error chains: no panic, and a decision that says either why
// it retries or why it stops.
func FuzzClassify(f *testing.F) {
	f.Add(503, "GET", "", 0, uint8(0))
	f.Add(200, "POST", "Idempotency-Key", 1, uint8(1))
	f.Add(-1, "", "X-Idempotency-Key", 2, uint8(2))
	f.Add(999, "PATCH", "", 3, uint8(3))
	f.Add(0, "\x00", "", 4, uint8(4))
	errs := []error{
		nil, io.EOF, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, fmt.Errorf("wrapped: %w", syscall.ECONNRESET),
		errors.New("plain"), &net.DNSError{IsNotFound: true}, errors.Join(io.ErrUnexpectedEOF, errors.New("x")),
	}
	presets := []policy.Policy{policy.Default(), presets.Python(), presets.Node(), presets.Codex(), presets.CodexStream(),
		presets.ReqwestDefault(), presets.ReqwestForHost("a.test"), policy.Never()}
	f.Fuzz(func(t *testing.T, status int, method, header string, errIndex int, processed uint8) {
		req, err := http.NewRequest("GET", "http://a.test/", nil)
		if err != nil {
			t.Skip()
		}
		req.Method = method
		if header != "" {
			req.Header[header] = []string{"k"}
		}
		a := policy.Attempt{Request: req, Number: 1, Processed: policy.Processed(processed % 4)}
		if e := errs[((errIndex%len(errs))+len(errs))%len(errs)]; e != nil {
			a.Err = e
		} else {
			a.Response = &http.Response{StatusCode: status, Header: http.Header{}}
		}
		for _, p := range presets {
			d := p.Classify(a)
			if d.Retry == (d.Stop != "") || (d.Retry && d.Cause == "") {
				t.Fatalf("%s: decision %+v", p.Name, d)
			}
		}
	})
}

// FuzzPolicyConfig: Validate never panics, and a policy it accepts runs its
// backoff without a negative wait.
func FuzzPolicyConfig(f *testing.F) {
	f.Add(3, int64(0), int64(0), int64(100e6), int64(8e9), uint8(0), uint8(0), int64(0))
	f.Add(0, int64(-1), int64(-1), int64(-1), int64(-1), uint8(9), uint8(9), int64(-1))
	f.Add(10001, int64(1<<62), int64(1<<62), int64(1<<62), int64(0), uint8(2), uint8(1), int64(1<<62))
	f.Fuzz(func(t *testing.T, attempts int, attemptTimeout, timeout, base, cap int64, jitter, use uint8, maxHint int64) {
		p := policy.Default()
		p.MaxAttempts = attempts
		p.AttemptTimeout, p.Timeout = time.Duration(attemptTimeout), time.Duration(timeout)
		p.Backoff = policy.Backoff{Base: time.Duration(base), Cap: time.Duration(cap), Jitter: policy.Jitter(jitter)}
		p.RetryAfter.Override, p.RetryAfter.Max = use%2 == 1, time.Duration(maxHint)
		if err := p.Validate(); err != nil {
			var ce *policy.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate: %T %v", err, err)
			}
			return
		}
		b := p.Backoff.New(func() float64 { return 0.999 })
		for range 70 {
			if d, stop := b.Next(); stop || d < 0 {
				t.Fatalf("backoff %+v: wait %v, stop %v", p.Backoff, d, stop)
			}
		}
	})
}

// FuzzRateLimit: whatever the rate-limit fields say (negative, huge, not
// a number, several policies, malformed structured fields), the hint is a
// wait from 0 to its cap, never a panic; a hint longer than Max is not
// honoured.
func FuzzRateLimit(f *testing.F) {
	f.Add(`"default";r=0;t=30`, "", "", "")
	f.Add(`"a";r=0;t=3, "b";r=0;t=7000`, "0", "1700000000", "5")
	f.Add(`"x";r=-1;t=-1`, "-1", "-5", "Fri, 31 Dec 9999 23:59:59 GMT")
	f.Add(`;;;,,,"";r=;t=`, "0", "99999999999999999999", "1e9")
	f.Add(`"q";q=100;w=10`, "", "", "")
	f.Fuzz(func(t *testing.T, ratelimit, remaining, reset, retryAfter string) {
		h := http.Header{}
		for k, v := range map[string]string{"Ratelimit": ratelimit, "X-Ratelimit-Remaining": remaining, "X-Ratelimit-Reset": reset, "Ratelimit-Remaining": remaining, "Ratelimit-Reset": reset, "Retry-After": retryAfter} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		now := time.Unix(1_800_000_000, 0)
		for _, ra := range []policy.RetryAfter{{}, {Max: time.Minute, Pace: true}, {Fractions: true}} {
			wait, found, ok := ra.Hint(h, now)
			if wait < 0 || wait > 100*365*24*time.Hour {
				t.Fatalf("%+v %v: wait %v", ra, h, wait)
			}
			if !found && wait != 0 || !ok && wait != 0 {
				t.Fatalf("%+v %v: wait %v without a hint (found %v, ok %v)", ra, h, wait, found, ok)
			}
		}
	})
}
