package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack/idempotency"
)

// Store keeps idempotency keys in Redis. It is safe for concurrent use.
type Store struct {
	c      goredis.UniversalClient
	prefix string
}

// New returns a store on c whose keys start with prefix (e.g.
// "orders-service:idem:"), so that services can share a server.
func New(c goredis.UniversalClient, prefix string) *Store { return &Store{c: c, prefix: prefix} }

var _ idempotency.Store = (*Store)(nil)

// value is what a key holds.
type value struct {
	FP       string      `json:"fp"`
	Done     bool        `json:"done"`
	Status   int         `json:"status,omitempty"`
	Header   http.Header `json:"header,omitempty"`
	Body     []byte      `json:"body,omitempty"`
	BodyKept bool        `json:"body_kept,omitempty"`
}

// begin claims KEYS[1] with ARGV[1] for ARGV[2] ms unless it exists, and
// returns what it holds otherwise: one round trip, atomic.
var begin = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
`)

// release deletes KEYS[1] if it is still a claim, not a response.
var release = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and not cjson.decode(v).done then redis.call('DEL', KEYS[1]) end
return 0
`)

func (s *Store) Begin(ctx context.Context, key, fp string, lease time.Duration) (*idempotency.Record, error) {
	claim, _ := json.Marshal(value{FP: fp})
	res, err := begin.Run(ctx, s.c, []string{s.prefix + key}, claim, max(lease.Milliseconds(), 1)).Text()
	if errors.Is(err, goredis.Nil) {
		return nil, nil // claimed
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency/redis: %w", err)
	}
	var v value
	if err := json.Unmarshal([]byte(res), &v); err != nil {
		return nil, fmt.Errorf("idempotency/redis: key %q holds %q: %w", key, res, err)
	}
	switch {
	case v.FP != fp:
		return nil, idempotency.ErrMismatch
	case !v.Done:
		return nil, idempotency.ErrInFlight
	}
	return &idempotency.Record{Status: v.Status, Header: v.Header, Body: v.Body, BodyKept: v.BodyKept}, nil
}

func (s *Store) Complete(ctx context.Context, key string, rec *idempotency.Record, keep time.Duration) error {
	done, _ := json.Marshal(value{FP: rec.Fingerprint, Done: true, Status: rec.Status, Header: rec.Header, Body: rec.Body, BodyKept: rec.BodyKept})
	n, err := complete.Run(ctx, s.c, []string{s.prefix + key}, done, rec.Fingerprint, max(keep.Milliseconds(), 1)).Int()
	switch {
	case err != nil:
		return fmt.Errorf("idempotency/redis: %w", err)
	case n == 0:
		return idempotency.ErrMismatch
	}
	return nil
}

// complete stores ARGV[1] under KEYS[1] for ARGV[3] ms unless the key is
// claimed by another fingerprint than ARGV[2]; 1 when it stored.
var complete = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and cjson.decode(v).fp ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
`)

func (s *Store) Release(ctx context.Context, key string) error {
	if err := release.Run(ctx, s.c, []string{s.prefix + key}).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("idempotency/redis: %w", err)
	}
	return nil
}
