package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// addrEnv names the address a child serves on.
const addrEnv = "CRASHTEST_ADDR"

// IsChild reports whether this test binary runs as a child.
func IsChild() bool { return os.Getenv(addrEnv) != "" }

// Serve serves h as a child: it prints "ready" once it listens, and
// returns only if serving fails. Lines h prints to standard output reach
// the parent's Await.
func Serve(h http.Handler) error {
	ln, err := net.Listen("tcp", os.Getenv(addrEnv))
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return http.Serve(ln, h)
}

// Server is the parent's view of a child server.
type Server struct {
	t     *testing.T
	test  string
	env   []string
	addr  string
	cmd   *exec.Cmd
	lines chan string

	mu sync.Mutex
	up chan struct{} // closed while a child is ready
}

// Start starts this test binary again as a child that runs only test (a
// test that calls Serve when IsChild), with env added, on a free port of
// 127.0.0.1, and waits for it to be ready.
func Start(t *testing.T, test string, env ...string) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{t: t, test: test, env: env, addr: addr, up: make(chan struct{})}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *Server) start() {
	cmd := exec.Command(os.Args[0], "-test.run=^"+s.test+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), addrEnv+"="+s.addr), s.env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
	}()
	s.cmd, s.lines = cmd, lines
	s.Await("ready")
	s.mu.Lock()
	close(s.up)
	s.mu.Unlock()
}

// URL is the child's base URL, the same across restarts.
func (s *Server) URL() string { return "http://" + s.addr }

// Transport dials the child only while one is ready: a retry sent while
// the child is down waits for Restart, so no verdict depends on how fast
// a process starts.
func (s *Server) Transport() *http.Transport {
	var d net.Dialer
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.mu.Lock()
		up := s.up
		s.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return d.DialContext(ctx, network, addr)
	}}
}

// Await waits for the child to print line.
func (s *Server) Await(line string) {
	s.t.Helper()
	timeout := time.After(30 * time.Second) // a guard against a hang, not a verdict on time
	for {
		select {
		case got, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("the child exited before printing %q", line)
			}
			if got == line {
				return
			}
		case <-timeout:
			s.t.Fatalf("the child never printed %q", line)
		}
	}
}

// Crash kills the child with SIGKILL, as a machine that loses power or an
// OOM killer would; dials wait until Restart.
func (s *Server) Crash() {
	s.mu.Lock()
	s.up = make(chan struct{})
	s.mu.Unlock()
	s.kill()
}

// Restart starts a new child on the same address, with env added in place
// of Start's.
func (s *Server) Restart(env ...string) {
	s.env = env
	s.start()
}

func (s *Server) kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	for range s.lines { // the reader ends with the pipe
	}
}

// Result is what the client of Post got.
type Result struct {
	Status int // 0 with Err
	Body   string
	Report *engine.Report
	Err    error
}

// Post sends body to path on the child as a keyed POST through a
// retrystack client that retries it (policy.Default with
// IdempotencyKeys, within 30 s), and delivers its result once it has one:
// the test crashes and restarts the child meanwhile.
func (s *Server) Post(path, body string) <-chan Result {
	done := make(chan Result, 1)
	p := policy.Default()
	p.IdempotencyKeys, p.Timeout = true, 30*time.Second
	c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: s.Transport()})
	if err != nil {
		done <- Result{Err: err}
		return done
	}
	go func() {
		resp, err := c.Post(s.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			done <- Result{Err: err, Report: engine.ReportFrom(err)}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- Result{Status: resp.StatusCode, Body: string(b), Report: engine.ReportOf(resp)}
	}()
	return done
}
