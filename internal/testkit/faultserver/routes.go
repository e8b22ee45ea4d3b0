package faultserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrystack/retrystack/internal/protocol"
)

// Echo is what /echo (and the end of a redirect chain) answers, as JSON.
type Echo struct {
	Method    string      `json:"method"`
	Host      string      `json:"host"`
	Path      string      `json:"path"`
	Query     string      `json:"query"`
	Header    http.Header `json:"header"`
	BodyBytes int64       `json:"body_bytes"`
}

type route struct {
	name   string
	handle func(*request) error
	// readsBody: the route reads the body itself (serve does not read it
	// first).
	readsBody bool
}

// match finds the route for a path and returns its path arguments.
func match(path string) (route, []string) {
	p := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(p) == 2 && p[0] == "s":
		return route{"/s", (*request).status, false}, p[1:]
	case len(p) == 2 && len(p[1]) == 4 && p[1][0] == 's': // /{endpoint}/s{code}
		return route{"/" + p[0] + "/s", (*request).status, false}, []string{p[1][1:]}
	case len(p) == 3 && p[0] == "fail":
		return route{"/fail", (*request).fail, false}, p[1:]
	case len(p) == 2 && p[0] == "stall":
		return route{"/stall", (*request).stall, false}, p[1:]
	case len(p) == 3 && p[0] == "redirect":
		return route{"/redirect", (*request).redirect, false}, p[1:]
	case len(p) == 2 && p[0] == "slow" && p[1] == "headers":
		return route{"/slow/headers", (*request).slowHeaders, false}, nil
	case len(p) == 2 && p[0] == "slow" && p[1] == "body":
		return route{"/slow/body", (*request).slowBody, false}, nil
	case len(p) == 1:
		switch p[0] {
		case "abort":
			return route{"/abort", (*request).abort, false}, nil
		case "truncated":
			return route{"/truncated", (*request).truncated, false}, nil
		case "orders":
			return route{"/orders", (*request).orders, false}, nil
		case "login":
			return route{"/login", (*request).login, false}, nil
		case "me":
			return route{"/me", (*request).me, false}, nil
		case "write":
			return route{"/write", (*request).write, false}, nil
		case "echo":
			return route{"/echo", (*request).echo, false}, nil
		case "auth":
			return route{"/auth", (*request).auth, false}, nil
		case "upload":
			return route{name: "/upload", handle: (*request).upload, readsBody: true}, nil
		}
	}
	return route{}, nil
}

// request is one request being handled, with what its route needs.
type request struct {
	*http.Request
	key       string
	args      []string
	bodyBytes int64
	w         *recorder
	s         *Server
	seq       int // its number in the log
}

// readBody reads body to its end (or as far as a route's reader goes),
// logs its length and SHA-256 ("" for no body), and returns the sum in
// hex.
func (r *request) readBody(body io.Reader) string {
	h := sha256.New()
	n, _ := io.Copy(h, body)
	sum := hex.EncodeToString(h.Sum(nil))
	r.bodyBytes = n
	r.s.mu.Lock()
	r.s.log[r.seq-1].BodyBytes = n
	if n > 0 {
		r.s.log[r.seq-1].BodySum = sum
	}
	r.s.mu.Unlock()
	return sum
}

func (r *request) status() error {
	code, err := statusCode(r.args[0])
	if err != nil {
		return err
	}
	return r.reply(code, true)
}

func (r *request) fail() error {
	k, err := strconv.Atoi(r.args[0])
	if err != nil || k < 0 {
		return fmt.Errorf("bad failure count %q", r.args[0])
	}
	code, err := statusCode(r.args[1])
	if err != nil {
		return err
	}
	then, err := intParam(r.Request, "then", http.StatusOK)
	if err != nil {
		return err
	}
	if _, err := statusCode(strconv.Itoa(then)); err != nil {
		return err
	}
	failure, err := r.params(code)
	if err != nil {
		return err
	}
	after, _ := r.params(then)
	if r.next() < k {
		return r.send(code, failure, true)
	}
	if to := r.URL.Query().Get("to"); to != "" {
		r.w.Header().Set("Location", to)
	}
	return r.send(then, after, false)
}

func (r *request) abort() error {
	if r.Method == http.MethodPost {
		r.s.processed(r.key, "/abort") // the body was read: the server may have acted
	}
	return r.drop(r.URL.Query().Get("reset") == "1")
}

func (r *request) orders() error {
	if r.Method == http.MethodPost {
		r.s.processed(r.key, "/orders")
	}
	return r.reply(http.StatusServiceUnavailable, false)
}

func (r *request) login() error {
	if r.next() == 0 {
		r.w.Header().Add("Set-Cookie", "lb=node-2; Path=/")
		return r.reply(http.StatusServiceUnavailable, false)
	}
	r.w.Header().Add("Set-Cookie", "session=abc; Path=/")
	return r.reply(http.StatusOK, false)
}

func (r *request) me() error {
	r.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := r.w.Write([]byte(r.Header.Get("Cookie")))
	return err
}

func (r *request) write() error {
	if r.Method != http.MethodPost {
		return r.reply(http.StatusMethodNotAllowed, false)
	}
	drop, err := intParam(r.Request, "drop", 0)
	if err != nil {
		return err
	}
	n := r.next()
	replayed := !r.s.writeOnce(r.key, r.Header.Get(protocol.IdempotencyKey))
	if n < drop {
		return r.drop(false)
	}
	if replayed {
		r.w.Header().Set(protocol.Replayed, "true")
	}
	return r.reply(http.StatusOK, false)
}

func (r *request) slowHeaders() error {
	delay, err := durationParam(r.Request, "delay")
	if err != nil {
		return err
	}
	code, err := intParam(r.Request, "code", http.StatusOK)
	if err != nil {
		return err
	}
	if _, err := statusCode(strconv.Itoa(code)); err != nil {
		return err
	}
	every, err := intParam(r.Request, "every", 1)
	if err != nil || every == 0 {
		return fmt.Errorf("bad every %q", r.URL.Query().Get("every"))
	}
	if every > 1 && (r.next()+1)%every != 0 { // only every Nth request is slow
		if delay, err = durationParam(r.Request, "base"); err != nil {
			return err
		}
	}
	if !r.s.wait(r.Context(), delay) {
		return r.drop(false) // the client or the server gave up
	}
	return r.reply(code, true)
}

// stall holds the first K requests of a key unanswered until their
// client gives up (or the server closes), then answers 200.
func (r *request) stall() error {
	k, err := strconv.Atoi(r.args[0])
	if err != nil || k < 0 {
		return fmt.Errorf("bad stall count %q", r.args[0])
	}
	if r.next() < k {
		r.s.wait(r.Context(), 24*time.Hour)
		return r.drop(false)
	}
	return r.reply(http.StatusOK, true)
}

func (r *request) slowBody() error {
	delay, err := durationParam(r.Request, "delay")
	if err != nil {
		return err
	}
	size, err := intParam(r.Request, "size", 64)
	if err != nil {
		return err
	}
	body := []byte(strings.Repeat("x", size))
	r.w.Header().Set("Content-Length", strconv.Itoa(size))
	r.w.WriteHeader(http.StatusOK)
	r.w.Write(body[:size/2])
	http.NewResponseController(r.w).Flush()
	if !r.s.wait(r.Context(), delay) {
		return r.drop(false)
	}
	_, err = r.w.Write(body[size/2:])
	return err
}

// truncated promises size bytes, sends half of them and closes the
// connection: a body that fails while the client reads it.
func (r *request) truncated() error {
	size, err := intParam(r.Request, "size", 1000)
	if err != nil {
		return err
	}
	r.w.Header().Set("Content-Length", strconv.Itoa(size))
	r.w.WriteHeader(http.StatusOK)
	r.w.Write([]byte(strings.Repeat("x", size/2)))
	http.NewResponseController(r.w).Flush()
	return r.drop(r.URL.Query().Get("reset") == "1")
}

func (r *request) redirect() error {
	code, err := statusCode(r.args[0])
	if err != nil {
		return err
	}
	if code < 300 || code > 399 {
		return fmt.Errorf("redirect status %d is not 3xx", code)
	}
	q := r.URL.Query()
	var loc string
	if r.args[1] == "loop" {
		loc = r.URL.RequestURI()
	} else {
		n, err := strconv.Atoi(r.args[1])
		if err != nil || n < 0 {
			return fmt.Errorf("bad hop count %q", r.args[1])
		}
		if n == 0 {
			return r.echo()
		}
		next := fmt.Sprintf("/redirect/%d/%d", code, n-1)
		if r.URL.RawQuery != "" {
			next += "?" + r.URL.RawQuery
		}
		switch {
		case n == 1 && q.Get("to") != "":
			loc = q.Get("to")
		case q.Get("cross") == "1":
			loc = r.otherOrigin() + next
		case q.Get("abs") == "1":
			loc = "http://" + r.Host + next
		case q.Get("rel") == "1":
			loc = strconv.Itoa(n - 1) // relative to this path: its last segment
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
		default:
			loc = next
		}
	}
	if name := q.Get("cookie"); name != "" {
		r.w.Header().Add("Set-Cookie", name+"=hop"+r.args[1]+"; Path=/")
	}
	r.w.Header().Set("Location", loc)
	return r.reply(code, false)
}

// otherOrigin swaps 127.0.0.1 and localhost, keeping the port.
func (r *request) otherOrigin() string {
	if strings.HasPrefix(r.Host, "localhost:") {
		return r.s.URL()
	}
	return r.s.LocalhostURL()
}

// auth answers 401 unless the request carries "Authorization: Bearer T"
// with T the token parameter (default "new"); a 200's body is the token.
func (r *request) auth() error {
	want := r.URL.Query().Get("token")
	if want == "" {
		want = "new"
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got != want {
		r.w.Header().Set("WWW-Authenticate", `Bearer realm="faultserver"`)
		return r.reply(http.StatusUnauthorized, false)
	}
	r.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := r.w.Write([]byte(got))
	return err
}

func (r *request) echo() error {
	r.w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(r.w).Encode(Echo{
		Method:    r.Method,
		Host:      r.Host,
		Path:      r.URL.Path,
		Query:     r.URL.RawQuery,
		Header:    r.Header,
		BodyBytes: r.bodyBytes,
	})
}

// reply sends code with a body (size=N bytes, or the status text) and, when
// hints is set, the Retry-After the query asks for.
func (r *request) reply(code int, hints bool) error {
	p, err := r.params(code)
	if err != nil {
		return err
	}
	return r.send(code, p, hints)
}

// answer is what the query asks a status route to send.
type answer struct {
	retryAfter string      // "" for none
	hints      http.Header // header=Name:Value and ratelimit-reset-in
	body       string
}

// params parses the query of a status route, before any state changes, so
// a bad parameter costs nothing.
func (r *request) params(code int) (answer, error) {
	q := r.URL.Query()
	a := answer{body: http.StatusText(code) + "\n"}
	if v, ok := q["retry-after"]; ok {
		a.retryAfter = v[0]
	}
	if q.Has("retry-after-in") {
		d, err := durationParam(r.Request, "retry-after-in")
		if err != nil {
			return answer{}, err
		}
		if a.retryAfter, err = httpDate(time.Now().Add(d), q.Get("retry-after-form")); err != nil {
			return answer{}, err
		}
	}
	for _, hv := range q["header"] {
		name, value, ok := strings.Cut(hv, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return answer{}, fmt.Errorf("header=%q: want Name:Value", hv)
		}
		if a.hints == nil {
			a.hints = http.Header{}
		}
		a.hints.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	if q.Has("ratelimit-reset-in") {
		d, err := durationParam(r.Request, "ratelimit-reset-in")
		if err != nil {
			return answer{}, err
		}
		if a.hints == nil {
			a.hints = http.Header{}
		}
		a.hints.Set("X-RateLimit-Remaining", "0")
		a.hints.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(d).Unix(), 10))
	}
	if q.Has("size") {
		n, err := intParam(r.Request, "size", 0)
		if err != nil {
			return answer{}, err
		}
		a.body = strings.Repeat("x", n)
	}
	return a, nil
}

func (r *request) send(code int, a answer, hints bool) error {
	h := r.w.Header()
	if hints && a.retryAfter != "" {
		h.Set("Retry-After", a.retryAfter)
	}
	if hints {
		for k, v := range a.hints {
			h[k] = v
		}
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	r.w.WriteHeader(code)
	_, err := r.w.Write([]byte(a.body))
	return err
}

// upload reads read=N bytes of the body of the first request per key
// (default 64 KiB), then resets the connection: a proxy or server giving
// up mid-upload. Later requests are read whole and answered 200 with the
// SHA-256 of the body they carried.
func (r *request) upload() error {
	limit := int64(64 << 10)
	if v := r.URL.Query().Get("read"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errors.New("read must be a byte count")
		}
		limit = n
	}
	if r.next() == 0 {
		r.readBody(io.LimitReader(r.Body, limit))
		return r.drop(true)
	}
	sum := r.readBody(r.Body)
	r.w.Header().Set("Content-Length", strconv.Itoa(len(sum)))
	_, err := r.w.Write([]byte(sum))
	return err
}

// drop closes the connection without a response; reset sends a TCP RST.
func (r *request) drop(reset bool) error {
	conn, _, err := http.NewResponseController(r.w).Hijack()
	if err != nil {
		return err
	}
	if tcp, ok := conn.(*net.TCPConn); ok && reset {
		tcp.SetLinger(0)
	}
	return conn.Close()
}

// next returns how many requests this path and key had before this one.
func (r *request) next() int {
	id := r.URL.Path + "?key=" + r.key
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	n := r.s.state[id]
	r.s.state[id] = n + 1
	return n
}

func (s *Server) processed(key, route string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats[routeKey{route, key}]
	st.Processed++
	s.stats[routeKey{route, key}] = st
}

// writeOnce performs a /write unless its Idempotency-Key was already
// processed for this key, and reports whether it did.
func (s *Server) writeOnce(key, idem string) bool {
	if idem != "" {
		s.mu.Lock()
		id := key + "\x00" + idem
		_, seen := s.written[id]
		s.written[id] = struct{}{}
		s.mu.Unlock()
		if seen {
			return false
		}
	}
	s.processed(key, "/write")
	return true
}

func statusCode(s string) (int, error) {
	code, err := strconv.Atoi(s)
	if err != nil || code < 200 || code > 599 {
		return 0, fmt.Errorf("bad status code %q", s)
	}
	return code, nil
}

func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad %s %q", name, v)
	}
	return n, nil
}

func durationParam(r *http.Request, name string) (time.Duration, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q", name, v)
	}
	return d, nil
}

// httpDate formats t in one of the three HTTP-date forms of RFC 9110 §5.6.7.
func httpDate(t time.Time, form string) (string, error) {
	t = t.UTC()
	switch form {
	case "", "imf":
		return t.Format(http.TimeFormat), nil
	case "rfc850":
		return t.Format("Monday, 02-Jan-06 15:04:05 GMT"), nil
	case "asctime":
		return t.Format(time.ANSIC), nil
	}
	return "", errors.New("bad retry-after-form " + strconv.Quote(form))
}
