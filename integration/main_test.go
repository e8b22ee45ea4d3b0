package integration

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retrystack/retrystack/policy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast is the default policy with waits scaled down for tests.
func fast() *policy.Policy {
	p := policy.Default()
	p.Backoff.Base = time.Millisecond
	p.Backoff.Cap = 5 * time.Millisecond
	return &p
}

// log keeps what a server saw, in order.
type log struct {
	mu   sync.Mutex
	seen []string
}

func (l *log) add(s string) { l.mu.Lock(); l.seen = append(l.seen, s); l.mu.Unlock() }

func (l *log) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// transport is a fresh base whose idle connections the test closes.
func transport(t *testing.T) *http.Transport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}
