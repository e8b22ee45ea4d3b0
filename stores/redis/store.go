package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/storekit"
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

// value is what a key holds: a claim, then the record its owner stored.
type value struct {
	FP       string              `json:"fp"`
	Token    string              `json:"token"` // the owner's: only it completes or releases the key
	Done     bool                `json:"done"`
	Status   int                 `json:"status,omitempty"`
	Header   map[string][][]byte `json:"header,omitempty"` // bytes, not strings: JSON would replace bytes that are not UTF-8
	Body     []byte              `json:"body,omitempty"`
	BodyKept bool                `json:"body_kept,omitempty"`
}

// begin claims KEYS[1] with ARGV[1] for ARGV[2] ms unless it exists, and
// returns what it holds otherwise: one round trip, atomic.
var begin = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
`)

// complete stores ARGV[1] under KEYS[1] for ARGV[3] ms unless another
// owner than ARGV[2] holds the key (this claim's lease ended, and another
// request claimed it); 1 when it stored.
var complete = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and cjson.decode(v).token ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
`)

// release deletes KEYS[1] if it is still ARGV[1]'s claim.
var release = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local d = cjson.decode(v)
  if not d.done and d.token == ARGV[1] then redis.call('DEL', KEYS[1]) end
end
return 0
`)

func (s *Store) Begin(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, *idempotency.Record, error) {
	c := &claim{s: s, key: s.prefix + key, fp: fp, token: storekit.Token()}
	v, _ := json.Marshal(value{FP: fp, Token: c.token})
	res, err := begin.Run(ctx, s.c, []string{c.key}, v, max(lease.Milliseconds(), 1)).Text()
	if errors.Is(err, goredis.Nil) {
		return c, nil, nil // claimed
	}
	if err != nil {
		return nil, nil, fmt.Errorf("idempotency/redis: %w", err)
	}
	var held value
	if err := json.Unmarshal([]byte(res), &held); err != nil {
		return nil, nil, fmt.Errorf("idempotency/redis: key %q holds %q: %w", key, res, err)
	}
	switch {
	case held.FP != fp:
		return nil, nil, idempotency.ErrMismatch
	case !held.Done:
		return nil, nil, idempotency.ErrInFlight
	}
	return nil, &idempotency.Record{Status: held.Status, Header: storekit.DecodeHeader(held.Header), Body: held.Body, BodyKept: held.BodyKept}, nil
}

// claim is a request's hold on its key, named by a random token.
type claim struct {
	s              *Store
	key, fp, token string
}

func (c *claim) Context(ctx context.Context) context.Context { return ctx }

func (c *claim) Complete(ctx context.Context, rec *idempotency.Record, keep time.Duration) error {
	done, _ := json.Marshal(value{FP: c.fp, Token: c.token, Done: true, Status: rec.Status, Header: storekit.EncodeHeader(rec.Header), Body: rec.Body, BodyKept: rec.BodyKept})
	n, err := complete.Run(ctx, c.s.c, []string{c.key}, done, c.token, max(keep.Milliseconds(), 1)).Int()
	switch {
	case err != nil:
		return fmt.Errorf("idempotency/redis: %w", err)
	case n == 0:
		return idempotency.ErrInFlight
	}
	return nil
}

func (c *claim) Release(ctx context.Context) error {
	if err := release.Run(ctx, c.s.c, []string{c.key}, c.token).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("idempotency/redis: %w", err)
	}
	return nil
}
