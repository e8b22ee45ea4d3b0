package engine

import (
	"context"
	"net/http"

	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/policy"
)

// pushesBack reports whether an operation tells the caller of the service
// it serves not to retry: it retried until a limit stopped it, its retry
// budget is spent (a storm) or keeps its timeouts from being retried (a
// slow service), or it was itself told not to retry. A layer
// that did not retry (one attempt allowed, a hint too long to wait) leaves
// the choice to its caller.
func pushesBack(rep *Report) bool {
	switch rep.Stop {
	case policy.StopBudgetExhausted, policy.StopTimeoutNotRetried, policy.StopPushback:
		return true
	case policy.StopAttemptsExhausted, policy.StopWaitExceedsBudget:
		return len(rep.Attempts) > 1
	}
	return false
}

// withSignals is a copy of h with the cross-layer headers set to their
// values ("" deletes one), when set is true: one map, sized for them, and
// one array for every value, as http.Header.Clone makes (its copy would
// grow for a header it lacks, and each value would be a slice of its own).
func withSignals(h http.Header, attemptName, attempt, timeoutName, timeout string, set bool) http.Header {
	nv := 2
	for _, v := range h {
		nv += len(v)
	}
	sv := make([]string, nv)
	h2 := make(http.Header, len(h)+2)
	for k, v := range h {
		if set && (k == attemptName || k == timeoutName) {
			continue
		}
		if v == nil {
			h2[k] = nil // Clone keeps a nil value: net/http reads it as "do not send" (User-Agent)
			continue
		}
		n := copy(sv, v)
		h2[k] = sv[:n:n]
		sv = sv[n:]
	}
	if set {
		for _, kv := range [2][2]string{{attemptName, attempt}, {timeoutName, timeout}} {
			if kv[1] != "" {
				sv[0] = kv[1]
				h2[kv[0]] = sv[:1:1]
				sv = sv[1:]
			}
		}
	}
	return h2
}

// TimeoutHeader is the name of the header with which o tells the server
// the time left, or "" when it sends none (operation.Owner.TimeoutHeader).
func (o *httpOp) TimeoutHeader() string {
	if !o.signals {
		return ""
	}
	return o.e.timeoutHeader
}

// attemptValue is the attempt header's value for attempt n (from 2):
// made once per engine for the first attempts, since it is the same on
// every operation's.
func (e *Engine) attemptValue(n int) string {
	if n < len(e.attemptValues) {
		return e.attemptValues[n]
	}
	return protocol.AttemptValue(n, e.p.MaxAttempts)
}

// signalHeaders are attempt n's cross-layer headers under ctx: the
// attempt on a retry, the time left under a deadline ("" for none), and
// whether the attempt's header must change: to carry them, or to drop
// the stale values of a request forwarded from a caller (a proxy). Stale
// values go whether or not o speaks the protocol with the host: a third
// party never gets a caller's.
func (o *httpOp) signalHeaders(ctx context.Context, n int) (attempt, timeout string, change bool) {
	if o.signals {
		if n > 1 {
			attempt = o.e.attemptValue(n)
		}
		if dl, ok := ctx.Deadline(); ok {
			timeout = protocol.TimeLeft(dl)
		}
	}
	stale := !o.e.signals.Off && ((attempt == "" && len(o.req.Header[o.e.attemptHeader]) > 0) ||
		(timeout == "" && len(o.req.Header[o.e.timeoutHeader]) > 0))
	return attempt, timeout, attempt != "" || timeout != "" || stale
}
