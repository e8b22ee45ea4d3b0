package nginxtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Config is the part of nginx's configuration a test writes itself.
type Config struct {
	// HTTP goes into the http block, before the server block: map,
	// limit_req_zone, upstream and the like.
	HTTP string
	// Server goes into the server block, after its listen directive:
	// locations, proxy_pass, timeouts, keepalive_timeout, limits.
	Server string
	// HTTP2 makes the listener speak HTTP/2 without TLS: h2c with prior
	// knowledge (listen ... http2), which net/http's Transport speaks with
	// Protocols.SetUnencryptedHTTP2(true).
	HTTP2 bool
}

// Server is a running nginx.
type Server struct {
	// Addr is where it listens, "127.0.0.1:port"; URL is "http://" + Addr.
	Addr, URL string
	// Dir holds its configuration, pid file, logs and temporary files.
	Dir string

	http2 bool
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited
}

// Entry is one line of the access log: one request nginx finished.
type Entry struct {
	Time           time.Time // $msec: when nginx logged the request (millisecond resolution)
	Conn           uint64    // $connection: the client connection's serial number
	ConnRequests   int       // $connection_requests: the request's number on its connection
	Protocol       string    // $server_protocol: "HTTP/1.1", "HTTP/2.0"
	Method         string    // $request_method
	URI            string    // $uri, without the query
	Status         int       // $status: what nginx answered (499: the client went away first)
	RequestLength  int64     // $request_length: request line, headers and body as received
	UpstreamStatus string    // $upstream_status: "-" when no upstream was asked, "502, 200" when several were
}

// logFormat is Entry's format; the upstream status, which can hold
// spaces, is last.
const logFormat = `'$msec $connection $connection_requests $server_protocol $request_method $uri $status $request_length $upstream_status'`

// barrierPath answers 204 without being logged: see [Server.Wait].
const barrierPath = "/.nginxtest-barrier"

// Binary returns the nginx executable: "nginx" on PATH, else
// /usr/sbin/nginx (Debian's, outside a non-root user's PATH); "" when
// there is none.
func Binary() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if fi, err := os.Stat("/usr/sbin/nginx"); err == nil && !fi.IsDir() {
		return "/usr/sbin/nginx"
	}
	return ""
}

// Start starts nginx with cfg and stops it when the test ends. It skips
// the test when there is no nginx, or fails it if NGINX_REQUIRED=1.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		if os.Getenv("NGINX_REQUIRED") == "1" {
			t.Fatal("nginx is not installed and NGINX_REQUIRED=1 (scripts/nginx-test.sh installs Debian's nginx-light)")
		}
		t.Skip("nginx is not installed (on PATH or at /usr/sbin/nginx): skipping the tests against a real proxy; install Debian's nginx-light, or run scripts/nginx-test.sh")
	}
	var lastErr error
	for range 5 { // another process may take the free port first
		s, err := start(t, bin, cfg)
		if err == nil {
			return s
		}
		lastErr = err
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	t.Fatalf("nginxtest: %v", lastErr)
	return nil
}

func start(t testing.TB, bin string, cfg Config) (*Server, error) {
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{Addr: addr, URL: "http://" + addr, Dir: dir, http2: cfg.HTTP2, done: make(chan struct{})}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(s.config(cfg)), 0o600); err != nil {
		return nil, err
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	// -p: relative paths and the prefix under dir; -e: the error log
	// before the configuration is read, so nothing is written elsewhere.
	s.cmd = exec.Command(bin, "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = stderr, stderr
	dieWithTest(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	if err := s.ready(10 * time.Second); err != nil {
		s.stop()
		return nil, fmt.Errorf("%w\nerror log:\n%s", err, s.ErrorLog())
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("nginx's error log (%s):\n%s", dir, s.ErrorLog())
		}
	})
	return s, nil
}

func (s *Server) config(cfg Config) string {
	d := s.Dir
	listen := "listen " + s.Addr
	if cfg.HTTP2 {
		listen += " http2"
	}
	user := ""
	if os.Geteuid() == 0 {
		// One process never changes user; the directive keeps nginx
		// from looking up "nobody" for the temporary paths it creates.
		user = "user root;"
	}
	return fmt.Sprintf(`# written by nginxtest
%[2]s
daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 512; }
http {
	client_body_temp_path %[1]s/client_body_temp;
	proxy_temp_path %[1]s/proxy_temp;
	fastcgi_temp_path %[1]s/fastcgi_temp;
	uwsgi_temp_path %[1]s/uwsgi_temp;
	scgi_temp_path %[1]s/scgi_temp;
	log_format nginxtest %[3]s;
	access_log %[1]s/access.log nginxtest;
	default_type text/plain;
%[4]s
	server {
		%[5]s;
		location = %[6]s { access_log off; return 204; }
%[7]s
	}
}
`, d, user, logFormat, cfg.HTTP, listen, barrierPath, cfg.Server)
}

// ready waits until nginx accepts connections, or fails if it exits.
func (s *Server) ready(within time.Duration) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(s.Dir, "nginx.pid")); err == nil {
			if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("nginx exited at start: %v", s.cmd.ProcessState)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nginx did not listen on %s within %v", s.Addr, within)
		}
	}
}

// stop ends the process by its PID: TERM (nginx's fast shutdown), then
// KILL if it is still there after 5 s.
func (s *Server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// ErrorLog returns nginx's error log (and whatever it wrote to stderr).
func (s *Server) ErrorLog() string {
	var b bytes.Buffer
	for _, f := range []string{"stderr.log", "error.log"} {
		data, _ := os.ReadFile(filepath.Join(s.Dir, f))
		b.Write(data)
	}
	return b.String()
}

// Entries returns the access log's entries so far, in the order nginx
// finished the requests.
func (s *Server) Entries(t testing.TB) []Entry {
	t.Helper()
	es, err := s.entries()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func (s *Server) entries() ([]Entry, error) {
	data, err := os.ReadFile(filepath.Join(s.Dir, "access.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// A line still being written (no newline yet) is left for the next
	// read.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var es []Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		e, err := parse(line)
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, nil
}

func parse(line string) (Entry, error) {
	f := strings.SplitN(line, " ", 9)
	if len(f) != 9 {
		return Entry{}, fmt.Errorf("nginxtest: access log line %q: want 9 fields", line)
	}
	var e Entry
	var errs []error
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		errs = append(errs, err)
		return n
	}
	sec, ms, _ := strings.Cut(f[0], ".")
	e.Time = time.UnixMilli(num(sec)*1000 + num(ms))
	e.Conn = uint64(num(f[1]))
	e.ConnRequests = int(num(f[2]))
	e.Protocol, e.Method, e.URI = f[3], f[4], f[5]
	e.Status = int(num(f[6]))
	e.RequestLength = num(f[7])
	e.UpstreamStatus = f[8]
	if err := errors.Join(errs...); err != nil {
		return Entry{}, fmt.Errorf("nginxtest: access log line %q: %w", line, err)
	}
	return e, nil
}

// Wait returns the entries whose URI is uri once there are at least n of
// them (nginx logs a request once it has sent the answer, so a client can
// hold the answer an instant before the line is written). Past n it
// settles: it sends nginx one more request, on a connection of its own,
// and reads the log again, so an entry logged late shows up too. It fails
// the test if fewer than n appear within 10 s.
func (s *Server) Wait(t testing.TB, uri string, n int) []Entry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		es := s.Entries(t)
		if len(match(es, uri)) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx logged %d requests for %s within 10 s, want %d; the log:\n%s", len(match(es, uri)), uri, n, format(es))
		}
		<-tick.C
	}
	s.barrier(t)
	return match(s.Entries(t), uri)
}

// barrier sends nginx a request on a connection of its own and reads the
// answer: nginx, one process with one event loop, has then handled every
// event that arrived before it.
func (s *Server) barrier(t testing.TB) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	if s.http2 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, s.URL+barrierPath, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("nginxtest: barrier request: %v", err)
	}
	resp.Body.Close()
}

func match(es []Entry, uri string) []Entry {
	var out []Entry
	for _, e := range es {
		if e.URI == uri {
			out = append(out, e)
		}
	}
	return out
}

// Format renders entries one a line, for a test's failure message.
func Format(es []Entry) string { return format(es) }

func format(es []Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "\t%s conn %d#%d %s %s %s → %d (upstream %s) %d bytes\n",
			e.Time.UTC().Format("15:04:05.000"), e.Conn, e.ConnRequests, e.Protocol, e.Method, e.URI, e.Status, e.UpstreamStatus, e.RequestLength)
	}
	return b.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
