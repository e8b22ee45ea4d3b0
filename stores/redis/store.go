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
	res, err := begin.Run(ctx, s.c, []string{s.prefix + key}, claim, lease.Milliseconds()).Text()
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
	// The fingerprint stays with the response: read it from the claim.
	claimed, err := s.c.Get(ctx, s.prefix+key).Bytes()
	if err != nil {
		return fmt.Errorf("idempotency/redis: Complete of %q: %w", key, err)
	}
	var v value
	if err := json.Unmarshal(claimed, &v); err != nil {
		return fmt.Errorf("idempotency/redis: key %q: %w", key, err)
	}
	v.Done, v.Status, v.Header, v.Body, v.BodyKept = true, rec.Status, rec.Header, rec.Body, rec.BodyKept
	done, _ := json.Marshal(v)
	if err := s.c.Set(ctx, s.prefix+key, done, keep).Err(); err != nil {
		return fmt.Errorf("idempotency/redis: %w", err)
	}
	return nil
}

func (s *Store) Release(ctx context.Context, key string) error {
	if err := release.Run(ctx, s.c, []string{s.prefix + key}).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("idempotency/redis: %w", err)
	}
	return nil
}
