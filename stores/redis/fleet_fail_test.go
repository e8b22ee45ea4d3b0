package redis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.uber.org/goleak"
)

// events records what a Fleet tells its Observer.
type events struct {
	mu    sync.Mutex
	names []string
	types []string
	told  chan string // each event's name, when made
}

func (e *events) Observe(ev middleware.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names = append(e.names, ev.Name)
	for _, a := range ev.Attrs {
		if a.Key == "error.type" {
			e.types = append(e.types, a.Value.AsString())
		}
	}
	if e.told != nil {
		e.told <- ev.Name
	}
}

func (e *events) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.names...)
}

// redisServer is a redis-server of the test's own, on a port that stays
// the same across a kill and a restart.
type redisServer struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts a redis-server on a free port (skipped when there is
// none on PATH, unless REDIS_REQUIRED is set).
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_REQUIRED") != "" {
			t.Fatal("REDIS_REQUIRED is set but redis-server is not on PATH")
		}
		t.Skip("no redis-server on PATH (.ci/run installs one)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &redisServer{t: t, port: port, dir: t.TempDir()}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs the server, empty, and waits until it answers.
func (s *redisServer) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
		if i == 500 {
			s.t.Fatalf("redis-server on %s did not answer", s.addr())
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness, not a verdict
	}
}

// kill stops the server with SIGKILL, as a crash does.
func (s *redisServer) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	s.cmd = nil
}

// A Redis killed and restarted empty: the process falls back to its local
// budget at the first exchange that fails, says so once, decides as a
// local budget fed the same successes would, and shares again at the
// first exchange that succeeds, saying so once.
func TestFleetFallsBackAndRecovers(t *testing.T) {
	srv := startRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer c.Close()
	var seen events
	f := newTestFleet(t, c, FleetConfig{Name: "orders", Observer: &seen})
	if !f.Sharing() {
		t.Fatal("not shared after an exchange with a running Redis")
	}
	local, _ := policy.NewEarnedBudget(0.2, 2)
	for range 30 {
		f.Deposit()
		local.Deposit()
	}
	f.exchange()

	srv.kill()
	f.exchange()
	f.exchange()
	if f.Sharing() {
		t.Fatal("shared after an exchange with a killed Redis")
	}
	if got := f.Retries(); got != local.(interface{ Retries() int }).Retries() {
		t.Errorf("fallen back, the fleet budget allows %d retries, a local budget fed the same successes %d", got, local.(interface{ Retries() int }).Retries())
	}
	n, want := drain(f), drain(local)
	if n != want || n == 0 {
		t.Errorf("fallen back, the fleet budget paid %d retries, the local budget %d", n, want)
	}
	if got := seen.got(); len(got) != 1 || got[0] != EventFallback {
		t.Errorf("events after two failed exchanges: %q, want one %s", got, EventFallback)
	}

	srv.start()
	f.exchange()
	if !f.Sharing() {
		t.Fatal("not shared after an exchange with the restarted Redis")
	}
	if got := seen.got(); len(got) != 2 || got[1] != EventShared {
		t.Errorf("events after the restart: %q, want %s then %s", got, EventFallback, EventShared)
	}
	// Restarted empty, the fleet starts full, as a new budget does.
	if got := f.Retries(); got != 2 {
		t.Errorf("after Redis restarted empty the fleet allows %d retries, want 2 (one process's Burst)", got)
	}
}

// fakeRedis answers every script with answer, whatever was asked, and
// every other command as a Redis that speaks RESP2 does; with answer ""
// it never answers a script. It tells scripts of each script it is sent.
type fakeRedis struct {
	mu2     sync.Mutex
	answer  string
	scripts chan struct{}
	mu      sync.Mutex
	conns   []net.Conn
}

func startFake(t *testing.T, answer string) (addr string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeRedis{answer: answer, scripts: make(chan struct{}, 100)}
	fakes.Store(l.Addr().String(), s)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, conn)
			s.mu.Unlock()
			wg.Go(func() { s.serve(conn) })
		}
	})
	return l.Addr().String()
}

// fakes are the running fakeRedis servers, by address.
var fakes sync.Map

func (s *fakeRedis) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			fmt.Fprint(conn, "-ERR unknown command 'HELLO'\r\n")
		case "EVALSHA", "EVAL":
			s.scripts <- struct{}{}
			s.mu2.Lock()
			answer := s.answer
			s.mu2.Unlock()
			if answer != "" {
				fmt.Fprint(conn, answer)
			}
		default:
			fmt.Fprint(conn, "+OK\r\n")
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	args := make([]string, n)
	for i := range args {
		if line, err = r.ReadString('\n'); err != nil {
			return nil, err
		}
		size, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// A Redis (or something in its place) that answers what the script never
// returns: the process decides alone, as a local budget would, and says
// why once; nothing panics.
func TestFleetBadAnswers(t *testing.T) {
	for name, answer := range map[string]string{
		"an integer":              ":7\r\n",
		"nil":                     "$-1\r\n",
		"an error":                "-ERR something odd\r\n",
		"no processes":            "*7\r\n:1\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
		"a word":                  "*7\r\n$2\r\nhi\r\n:0\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
		"a huge stock":            "*7\r\n:99999999999999999\r\n:0\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
		"the smallest integer":    "*7\r\n:-9223372036854775808\r\n:0\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
		"a number past int64":     "*7\r\n$20\r\n99999999999999999999\r\n:0\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
		"negative successes":      "*7\r\n:1\r\n:1\r\n:1\r\n:-20\r\n:0\r\n:0\r\n:0\r\n",
		"a billion timeouts":      "*7\r\n:1\r\n:1\r\n:1\r\n:0\r\n:1000000001\r\n:0\r\n:0\r\n",
		"too few values":          "*5\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n",
		"negative lately":         "*7\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n:-1\r\n:0\r\n",
		"a hold without its time": "*8\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n$6\r\nhost:x\r\n",
		"a hold in the past":      "*9\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n$6\r\nhost:x\r\n:-5\r\n",
		"a hold for a year":       "*9\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n$6\r\nhost:x\r\n:31536000000\r\n",
		"a nested array":          "*7\r\n*1\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c := goredis.NewClient(&goredis.Options{Addr: startFake(t, answer), MaxRetries: -1})
			defer c.Close()
			var seen events
			f := newTestFleet(t, c, FleetConfig{Name: "orders", Observer: &seen})
			f.exchange()
			if f.Sharing() {
				t.Fatal("shared after a bad answer")
			}
			local, _ := policy.NewEarnedBudget(0.2, 2)
			if n, want := drain(f), drain(local); n != want {
				t.Errorf("after a bad answer the fleet budget paid %d retries, a local one %d", n, want)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
			if got := f.HeldUntil(req, "x"); !got.IsZero() {
				t.Errorf("a bad answer's hold holds until %v", got)
			}
			if got := seen.got(); len(got) != 1 || got[0] != EventFallback {
				t.Errorf("events: %q, want one %s", got, EventFallback)
			}
		})
	}
}

// A Redis that does not answer holds no request: the budget and the holds
// decide while an exchange waits, and the exchange gives up at its
// timeout (here: when the connection closes).
func TestFleetNoRequestWaitsOnRedis(t *testing.T) {
	addr := startFake(t, "") // never answers a script
	fake, _ := fakes.Load(addr)
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	var seen events
	f, err := NewFleet(c, FleetConfig{Name: "orders", Interval: 10 * time.Second, Observer: &seen})
	if err != nil {
		t.Fatal(err)
	}
	<-fake.(*fakeRedis).scripts // the first exchange is under way, and will not end
	if f.exchanging.TryLock() {
		t.Fatal("no exchange under way")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	f.Deposit()
	f.Hold(req, "x", time.Now().Add(time.Minute))
	if got := f.HeldUntil(req, "x"); got.IsZero() {
		t.Error("a process's own hold waits for Redis")
	}
	if !f.Withdraw() || f.Sharing() {
		t.Error("before any exchange ended, the local budget did not pay a retry")
	}
	if f.exchanging.TryLock() {
		t.Fatal("the exchange ended before the test: the calls above may have waited for it")
	}
	f.Close() // the exchange ends at its timeout (500 ms: one interval, at most half a second)
	if got := seen.got(); len(got) != 1 || got[0] != EventFallback {
		t.Errorf("events: %q, want one %s", got, EventFallback)
	}
}

// An exchange that hangs (a client that ignores its context, a Redis that
// accepted and stopped answering) does not keep the process on figures
// that grow old: it falls back two intervals after the last exchange that
// succeeded, while the exchange still hangs.
func TestFleetFallsBackWhileAnExchangeHangs(t *testing.T) {
	addr := startFake(t, "*7\r\n:2000000\r\n:0\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n")
	v, _ := fakes.Load(addr)
	fake := v.(*fakeRedis)
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: time.Hour})
	defer c.Close()
	seen := events{told: make(chan string, 10)}
	f, err := NewFleet(c, FleetConfig{Name: "orders", Interval: 10 * time.Millisecond, Observer: &seen})
	if err != nil {
		t.Fatal(err)
	}
	<-fake.scripts
	for !f.Sharing() {
		<-fake.scripts // the next exchanges, until one has ended
	}
	fake.mu2.Lock()
	fake.answer = "" // from now on, no answer
	fake.mu2.Unlock()
	if name := <-seen.told; name != EventFallback {
		t.Fatalf("event %s, want %s", name, EventFallback)
	}
	if f.Sharing() {
		t.Error("shared after the fallback")
	}
	if f.exchanging.TryLock() {
		t.Error("no exchange hangs: the fallback came from its end, not from the figures' age")
	}
	seen.mu.Lock()
	if seen.types[0] != "timeout" {
		t.Errorf("error.type %q, want timeout", seen.types[0])
	}
	seen.mu.Unlock()
	c.Close() // ends the hanging exchange
	f.Close()
}

// A key of the fleet's that holds another type (someone else's data, a
// name clash) is a failed exchange, not a panic; the fleet shares again
// once the key is gone.
func TestFleetWrongTypeKey(t *testing.T) {
	c := testClient(t)
	name := fleetName(t, c)
	var seen events
	f := newTestFleet(t, c, FleetConfig{Name: name, Observer: &seen})
	if err := c.Set(context.Background(), f.keys[0], "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	f.exchange()
	if f.Sharing() {
		t.Fatal("shared with a budget key of the wrong type")
	}
	c.Del(context.Background(), f.keys[0])
	f.exchange()
	if !f.Sharing() {
		t.Fatal("not shared once the key was deleted")
	}
	if got := seen.got(); len(got) != 2 || got[0] != EventFallback || got[1] != EventShared {
		t.Errorf("events: %q", got)
	}
}

// Credit Redis holds beyond any fleet's (a corrupted or hostile value) is
// not believed: the process decides alone.
func TestFleetHugeCreditInRedis(t *testing.T) {
	c := testClient(t)
	name := fleetName(t, c)
	f := newTestFleet(t, c, FleetConfig{Name: name})
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	bucket := now.UnixMilli() / 100
	for _, v := range []string{"100000000000000000000", "1e300", "9223372036854775807"} {
		c.HSet(context.Background(), f.keys[0], "e:"+strconv.FormatInt(bucket, 10), v)
		f.exchange()
		if f.Sharing() {
			t.Errorf("shared with a last second's credit of %s", v)
		}
		if n := drain(f); n > 2 {
			t.Errorf("with a last second's credit of %s in Redis, the process paid %d retries (its local budget: 2)", v, n)
		}
	}
}

// Close ends the exchange: nothing of a Fleet outlives it.
func TestFleetCloseLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := startRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	f, err := NewFleet(c, FleetConfig{Name: "orders", Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	f.Hold(req, "x", time.Now().Add(time.Second))
	f.Close()
	f.Close() // twice is fine
	c.Close()
}

// A Fleet used after Close (a client that outlives it) decides alone once
// its figures are old, holds what it held, and never blocks or panics.
func TestFleetUsedAfterClose(t *testing.T) {
	srv := startRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer c.Close()
	f := newTestFleet(t, c, FleetConfig{Name: "orders", Interval: 10 * time.Millisecond})
	f.exchange()
	f.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	f.Hold(req, "x", time.Now().Add(time.Minute))
	if f.HeldUntil(req, "x").IsZero() {
		t.Error("a closed Fleet forgot its own hold")
	}
	for f.Sharing() {
		time.Sleep(time.Millisecond) // until the figures are two intervals old: polling, not a verdict
	}
	local, _ := policy.NewEarnedBudget(0.2, 2)
	f.Deposit()
	local.Deposit()
	if n, want := drain(f), drain(local); n != want {
		t.Errorf("closed, the fleet budget paid %d retries, a local one %d", n, want)
	}
}
