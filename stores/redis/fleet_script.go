package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// exchangeScript adds one process's counts to the fleet's figures and
// returns them, in one round trip, atomically. It reads the time from
// Redis (TIME), so the processes' clocks do not matter: the last second is
// Redis's, and a hold travels as the time it has left.
//
// KEYS: the budget hash (stock; e:<bucket> credit earned, c:<bucket>
// credit charged, n:<bucket> successes and t:<bucket> timeouts, per 100 ms
// bucket of the last second), the processes' sorted set (score: when each
// last exchanged, ms), the holds hash (scope → until, Redis's ms). ARGV:
// the process's id, its earned, refunded, spent and charged credit
// (millionths of a retry), the stock's cap per process, its successes and
// timeouts (counts), then pairs of a scope and how long its hold lasts
// (ms). A process that joins (new in the sorted set: its first exchange,
// one after 3 s away, or any after Redis restarted empty) brings a
// process's cap to the stock, as a new local budget starts full. The
// holds hash keeps at most 10 000 scopes: a new one beyond is not kept.
//
// It returns the stock, the last second's credit, the processes, the last
// second's successes and timeouts, those of its last two buckets (100 to
// 200 ms), then pairs of a scope held and the ms its hold has left.
var exchangeScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local bucket = math.floor(now / 100)
local earned, refunded, spent, charged = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local burst = tonumber(ARGV[6])

local joins = redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 3000)
local active = redis.call('ZCARD', KEYS[2])

if earned > 0 then redis.call('HINCRBY', KEYS[1], 'e:' .. bucket, earned) end
if charged > 0 then redis.call('HINCRBY', KEYS[1], 'c:' .. bucket, charged) end
local successes, timeouts = tonumber(ARGV[7]), tonumber(ARGV[8])
if successes > 0 then redis.call('HINCRBY', KEYS[1], 'n:' .. bucket, successes) end
if timeouts > 0 then redis.call('HINCRBY', KEYS[1], 't:' .. bucket, timeouts) end
local recent, stock, succ, tout, succ2, tout2 = 0, nil, 0, 0, 0, 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local f, v = fields[i], tonumber(fields[i + 1]) or 0
  if f == 'stock' then
    stock = v
  else
    local b = tonumber(string.sub(f, 3))
    if b == nil or b <= bucket - 10 or b > bucket + 10 then
      redis.call('HDEL', KEYS[1], f)
    elseif string.sub(f, 1, 2) == 'e:' then
      recent = recent + v
    elseif string.sub(f, 1, 2) == 'c:' then
      recent = recent - v
    elseif string.sub(f, 1, 2) == 'n:' then
      succ = succ + v
      if b >= bucket - 1 then succ2 = succ2 + v end
    elseif string.sub(f, 1, 2) == 't:' then
      tout = tout + v
      if b >= bucket - 1 then tout2 = tout2 + v end
    end
  end
end
local cap = burst * active + math.max(recent, 0)
if stock == nil then stock = cap end -- a new fleet, or a Redis restarted empty: full, as a new local budget
if joins == 1 then refunded = refunded + burst end
stock = math.min(stock + earned + refunded - spent, cap)
stock = math.max(stock, -cap)
redis.call('HSET', KEYS[1], 'stock', string.format('%d', stock))
redis.call('PEXPIRE', KEYS[1], 60000)
redis.call('PEXPIRE', KEYS[2], 60000)

local held = redis.call('HLEN', KEYS[3])
for i = 9, #ARGV, 2 do
  local untilms = now + math.min(math.max(tonumber(ARGV[i + 1]) or 0, 0), 3600000)
  local old = redis.call('HGET', KEYS[3], ARGV[i])
  if old or held < 10000 then
    if untilms > (tonumber(old or '0') or 0) then redis.call('HSET', KEYS[3], ARGV[i], string.format('%d', untilms)) end
    if not old then held = held + 1 end
  end
end
local out = {string.format('%d', stock), string.format('%d', recent), active, string.format('%d', succ), string.format('%d', tout), string.format('%d', succ2), string.format('%d', tout2)}
local holds = redis.call('HGETALL', KEYS[3])
local last = now
for i = 1, #holds, 2 do
  local u = tonumber(holds[i + 1]) or 0
  if u <= now then
    redis.call('HDEL', KEYS[3], holds[i])
  elseif #out < 7 + 2 * 1000 then
    table.insert(out, holds[i])
    table.insert(out, u - now)
    last = math.max(last, u)
  end
end
if last > now then redis.call('PEXPIRE', KEYS[3], last - now + 60000) end
return out
`)

// call runs one exchange: c and holds (their waits timed from sent, before
// the call: Redis's until is no earlier) out, the fleet's
// figure and the holds it knows of in.
func (f *Fleet) call(ctx context.Context, c counts, holds []hold, sent time.Time) (figure, []hold, error) {
	args := make([]any, 0, 8+2*len(holds))
	args = append(args, f.id, c.earned, c.refunded, c.spent, c.charged, f.burst, c.earned/f.earn, c.timeouts)
	for _, h := range holds {
		args = append(args, field(h.scope), max((h.until.Sub(sent)+time.Millisecond-1).Milliseconds(), 0)) // rounded up: a hold never shrinks
	}
	res, err := exchangeScript.Run(ctx, f.c, f.keys, args...).Slice()
	if err != nil {
		return figure{}, nil, fmt.Errorf("redis fleet %s: %w", f.name, err)
	}
	return parseAnswer(res, f.now())
}

// parseAnswer reads the script's answer; what it did not return is a
// *badAnswer, as are figures beyond any a fleet can have. Holds are timed
// from received: the answer left Redis before that, so a hold ends no
// earlier here than there.
func parseAnswer(res []any, received time.Time) (figure, []hold, error) {
	if len(res) < 7 || len(res)%2 == 0 {
		return figure{}, nil, &badAnswer{fmt.Sprintf("%d values", len(res))}
	}
	var n [7]int64
	for i := range n {
		v, err := integer(res[i])
		if err != nil {
			return figure{}, nil, err
		}
		n[i] = v
	}
	fig := figure{stock: n[0], recent: n[1], active: n[2], successes: n[3], timeouts: n[4], lately: [2]int64{n[5], n[6]}}
	if fig.active < 1 || fig.active > maxActive || !within(fig.stock, maxCredit) || !within(fig.recent, maxCredit) ||
		!count(fig.successes) || !count(fig.timeouts) || !count(fig.lately[0]) || !count(fig.lately[1]) {
		return figure{}, nil, &badAnswer{fmt.Sprintf("figures out of bounds: %+v", fig)}
	}
	var held []hold
	for i := 7; i+1 < len(res); i += 2 {
		scope, ok := res[i].(string)
		left, err := integer(res[i+1])
		if !ok || err != nil || left < 0 || left > int64(time.Hour/time.Millisecond) {
			return figure{}, nil, &badAnswer{fmt.Sprintf("hold %v: %v", res[i], res[i+1])}
		}
		held = append(held, hold{unfield(scope), received.Add(time.Duration(left+1) * time.Millisecond)}) // Redis's clock reads whole ms
	}
	return fig, held, nil
}

// integer is an answer's integer, sent as a Redis integer or a string.
func integer(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, &badAnswer{strconv.Quote(v)}
		}
		return n, nil
	}
	return 0, &badAnswer{fmt.Sprintf("%T", v)}
}

// count reports whether v may be a count of a fleet's requests in a second.
func count(v int64) bool { return 0 <= v && v <= maxCount }

// within reports whether v is between -limit and limit.
func within(v, limit int64) bool { return -limit <= v && v <= limit }
