package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/limit"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"github.com/retrystack/retrystack/telemetry"
	"github.com/retrystack/retrystack/throttle"
	"go.opentelemetry.io/otel/trace"
)

// A scenario is one row of the lab: a setup, the operations it sends, and
// the figures it must reproduce.
type scenario struct {
	id, setup string
	preset    string               // a key of presetTable
	tune      func(*policy.Policy) // the row's changes to the preset
	hooks     func(*trial) engine.Hooks
	engine    func(*trial, *engine.Config) // further engine settings
	stack     []string                     // layer names, outermost first; nil: the default stack
	capture   bool                         // the cookie layer stores cookies of discarded attempts
	h2        []faultserver.H2Fault        // non-nil: run against a fresh h2c server with this script
	breaker   func(*trial) breaker.Config  // the "breaker" layer's; nil: breaker.Config{}
	hedge     hedge.Config                 // the "hedge" layer's
	throttle  func(*trial) throttle.Config // the "throttle" layer's; nil: throttle.Config{}
	limit     func(*trial) limit.Config    // the "limit" layer's; nil: limit.Config{Limit: 4}
	chaos     func(*trial) chaos.Config    // the "chaos" layer's; nil: -chaos's, or no chaos layer
	run       func(t *trial)
	alone     bool // runs with no other row at once: it measures load or timing
	want      expect
	// wantOurs, for a row that reproduces another system, is what
	// retrystack's defaults must do in the same scenario, where the
	// lab's opening screen tells it; nil: shown, not checked.
	wantOurs *expect
	note     string // why the row differs from the seed system, if it does
}

// expect is a row's expected figures in the notation of scenarios.tsv:
// "-" is not checked, "a|b" is either, extra is "k=v;k=v".
type expect struct {
	requests, result, stop, extra string
}

// figures are what a scenario measures, in the lab's JSON shape.
type figures struct {
	ServerRequests []int             `json:"server_requests"`
	Result         string            `json:"result"`
	Stop           string            `json:"stop,omitempty"`
	PlannedWaitsMS []int64           `json:"planned_waits_ms"`
	Extra          map[string]string `json:"extra"`
}

// row is one scenario's outcome.
type row struct {
	sc         scenario
	preset     string
	stack      string
	got        figures
	deviations []string
	// ours is the same scenario under retrystack's defaults (the default
	// preset and stack, none of the row's own tuning), for a row that
	// reproduces another system; nil otherwise.
	ours *figures
}

// reproduces reports whether sc reproduces another system's behaviour (a
// seed row under another client's preset): the lab then runs it under
// retrystack's defaults too, and prints both.
func reproduces(sc scenario) bool {
	return strings.HasPrefix(sc.id, "seed") && sc.preset != "default" && sc.preset != "none"
}

// ourVersion is sc under retrystack's defaults: the default preset and
// stack; of the row's own tuning only the caller's deadlines (Timeout,
// AttemptTimeout) stay, as a caller of retrystack would set them too.
func ourVersion(sc scenario) scenario {
	tune := sc.tune
	sc.preset, sc.stack, sc.tune = "default", nil, nil
	if tune != nil {
		sc.tune = func(p *policy.Policy) {
			theirs := presetTable["default"].policy()
			tune(&theirs)
			p.Timeout, p.AttemptTimeout = theirs.Timeout, theirs.AttemptTimeout
		}
	}
	sc.id += "#ours" // its own key on the server
	return sc
}

// preset is a retry policy the lab can apply; a nil policy means no retry
// layer at all.
type preset struct {
	policy func() policy.Policy
	about  string
	// keepsNoStream: the client cannot send a streaming body twice
	// (reqwest cannot clone one); retrystack keeps one to replay it.
	keepsNoStream bool
}

var presetTable = map[string]preset{
	"none":             {nil, "no retry layer: what net/http alone does", false},
	"default":          {policy.Default, "retrystack's safe default", false},
	"alone":            {policy.Alone, "retrystack's default for a client that is alone: a timed-out attempt retried from its stock", false},
	"codex":            {presets.Codex, "Codex's request retries: 5xx and transport errors, 4 retries", false},
	"python":           {presets.Python, "a careful hand-written Python client: idempotent methods, Retry-After wins", false},
	"node":             {presets.Node, "a careful GET-only Node.js client: 3 attempts in 4 s", false},
	"reqwest-default":  {presets.ReqwestDefault, "reqwest 0.13.5's client default: HTTP/2 protocol NACKs only", true},
	"reqwest-for-host": {func() policy.Policy { return presets.ReqwestForHost("127.0.0.1") }, "reqwest 0.13.5's for_host(127.0.0.1): nothing until a classifier is set", true},
	"reqwest-never":    {presets.ReqwestNever, "reqwest 0.13.5's never()", true},
}

func presetNames() []string {
	names := make([]string, 0, len(presetTable))
	for n := range presetTable {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// layers builds every layer the lab knows, in the default order; "retry"
// is present only under a preset with a policy.
func layers(sc scenario, presetName string, t *trial) ([]middleware.Layer, error) {
	out := []middleware.Layer{
		middleware.ErrorForStatus(0),
		redirect.Layer(redirect.Config{}),
		cookiejar.Layer(cookiejar.Config{Jar: cookiejar.NewJar(), DropDiscarded: !sc.capture}), // the seeds' clients keep cookies, and lose a discarded response's
	}
	if t.tel != nil {
		out = append([]middleware.Layer{t.tel.Operation()}, out...)
	}
	if pr := presetTable[presetName]; pr.policy != nil {
		p := pr.policy()
		if sc.tune != nil {
			sc.tune(&p)
		}
		cfg := engine.Config{Policy: p}
		if pr.keepsNoStream {
			cfg.ReplayLimit = 1 // a buffer every streaming body of the rows outgrows: the source keeps none
		}
		if sc.hooks != nil {
			cfg.Hooks = sc.hooks(t)
		}
		if sc.engine != nil {
			sc.engine(t, &cfg)
		}
		e, err := engine.New(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, e.Layer())
	}
	bc := breaker.Config{}
	if sc.breaker != nil {
		bc = sc.breaker(t)
	}
	tc := throttle.Config{}
	if sc.throttle != nil {
		tc = sc.throttle(t)
	}
	lc := limit.Config{Limit: 4}
	if sc.limit != nil {
		lc = sc.limit(t)
	}
	out = append(out, breaker.Layer(bc), hedge.Layer(sc.hedge), throttle.Layer(tc), limit.Layer(lc))
	if sc.chaos != nil {
		out = append(out, chaos.Layer(sc.chaos(t)))
	}
	if t.tel != nil {
		out = append(out, t.tel.Attempt())
	}
	return out, nil
}

// defaultStack is reqwest's order, retrystack's default.
var defaultStack = []string{"redirect", "cookies", "retry"}

// buildStack returns the named layers in the given order.
func buildStack(names []string, sc scenario, presetName string, t *trial) (middleware.Stack, error) {
	ls, err := layers(sc, presetName, t)
	if err != nil {
		return middleware.Stack{}, err
	}
	all, err := middleware.NewStack(ls...)
	if err != nil {
		return middleware.Stack{}, err
	}
	// The pool has more layers than a row uses: Select only reorders, so
	// the unnamed ones are removed first.
	have := all.Names()
	for _, n := range names {
		if !slices.Contains(have, n) {
			return middleware.Stack{}, &middleware.LayerError{Name: n, Reason: "not in the stack (have " + strings.Join(have, ", ") + ")"}
		}
	}
	for _, n := range have {
		if !slices.Contains(names, n) {
			if all, err = all.Without(n); err != nil {
				return middleware.Stack{}, err
			}
		}
	}
	return all.Select(names...)
}

func selectScenarios(re *regexp.Regexp) []scenario {
	var out []scenario
	for _, sc := range scenarios {
		if re.MatchString(sc.id) {
			out = append(out, sc)
		}
	}
	return out
}

// lanes is how many rows run at once. The rows mostly wait (backoffs,
// timeouts, slow servers), so four share two cores; the rows marked alone
// run afterwards, one at a time.
const lanes = 4

// runAll runs the scenarios, lanes at a time, each lane with its own
// HTTP/1.1 fault server (a row counts its requests once its server is
// idle) and each scenario under its own key; h2c servers are per row.
func runAll(ctx context.Context, selected []scenario, opts options) ([]row, error) {
	var tel *telemetry.Telemetry
	if opts.otlp != "" {
		if exportTraces == nil {
			return nil, errors.New("this retrylab is built without the OTLP exporter: go run -tags otlp ./cmd/retrylab -otlp " + opts.otlp)
		}
		tp, shutdown, err := exportTraces(ctx, opts.otlp)
		if err != nil {
			return nil, err
		}
		defer shutdown(context.Background()) // flushes every scenario's trace
		if tel, err = telemetry.New(telemetry.Config{TracerProvider: tp}); err != nil {
			return nil, err
		}
	}
	servers := make([]*faultserver.Server, max(1, min(lanes, len(selected))))
	for i := range servers {
		srv, err := faultserver.New()
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		servers[i] = srv
	}
	rows := make([]row, len(selected))
	next := make(chan int)
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			for i := range next {
				rows[i] = runRow(ctx, srv, tel, selected[i], opts)
			}
		})
	}
	for i, sc := range selected {
		if !sc.alone {
			next <- i
		}
	}
	close(next)
	wg.Wait()
	for i, sc := range selected {
		if sc.alone {
			rows[i] = runRow(ctx, servers[0], tel, sc, opts)
		}
	}
	return rows, nil
}

// runRow runs sc, and for a row that reproduces another system, the same
// scenario under retrystack's defaults.
func runRow(ctx context.Context, srv *faultserver.Server, tel *telemetry.Telemetry, sc scenario, opts options) row {
	r, err := runOne(ctx, srv, tel, sc, opts)
	if err != nil {
		// A row that cannot run is a deviation, not the end of the run.
		r = row{sc: sc, preset: opts.preset, got: figures{Result: "-", PlannedWaitsMS: []int64{}, Extra: map[string]string{}},
			deviations: []string{"cannot run: " + err.Error()}}
	}
	if reproduces(sc) && !opts.experimentMode {
		// Not traced: -otlp exports each row as its one trace.
		o, err := runOne(ctx, srv, nil, ourVersion(sc), opts)
		switch {
		case err != nil:
			r.deviations = append(r.deviations, "retrystack's defaults cannot run: "+err.Error())
		case sc.wantOurs != nil:
			r.deviations = append(r.deviations, prefixed("retrystack's defaults: ", compare(*sc.wantOurs, o.got))...)
			fallthrough
		default:
			r.ours = &o.got
		}
	}
	return r
}

// exportTraces makes the tracer provider of -otlp; nil unless the lab is
// built with -tags otlp (otlp.go), so that the default build does not
// compile the exporter's protobuf code.
var exportTraces func(ctx context.Context, endpoint string) (trace.TracerProvider, func(context.Context) error, error)

// scenarioTimeout bounds a scenario, so a broken one cannot hang the lab.
const scenarioTimeout = 10 * time.Second

func runOne(ctx context.Context, srv *faultserver.Server, tel *telemetry.Telemetry, sc scenario, opts options) (row, error) {
	presetName := sc.preset
	if opts.preset != "" {
		presetName = opts.preset
	}
	names := sc.stack
	if names == nil {
		names = defaultStack
	}
	if opts.stack != nil {
		names = opts.stack
	} else if presetTable[presetName].policy == nil {
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "retry" })
	}
	if opts.chaos != nil { // -chaos: the row's faults are replaced, innermost unless -stack places them
		cfg := *opts.chaos
		sc.chaos = func(*trial) chaos.Config { return cfg }
		if !slices.Contains(names, "chaos") {
			names = append(slices.Clone(names), "chaos")
		}
	}
	if tel != nil { // outermost and innermost, whatever the order between
		names = append(append([]string{"telemetry"}, names...), "attempt-telemetry")
	}

	t := &trial{srv: srv, tel: tel, key: sc.id, base: srv.URL(), extra: map[string]string{}, signalled: make(chan struct{})}
	t.ctx, t.cancel = context.WithTimeout(ctx, scenarioTimeout)
	defer t.cancel()
	if tel != nil { // each scenario is a trace of its own
		var root trace.Span
		t.ctx, root = tel.Tracer().Start(t.ctx, "retrylab "+sc.id, trace.WithNewRoot())
		defer root.End()
	}
	stack, err := buildStack(names, sc, presetName, t)
	if err != nil {
		return row{}, err
	}
	transport := &http.Transport{}
	t.count = func() int {
		// A client that gave up may leave the server still reading the
		// request; count once it is done (or has been busy too long).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if srv.WaitIdle(ctx) != nil {
			// Busy that long: most likely a connection the transport
			// dialed for a send cancelled before it was written (a
			// hedge's), kept idle and silent, which the server waits on.
			// Close it, or every later count of the row waits too.
			transport.CloseIdleConnections()
			ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
			srv.WaitIdle(ctx2)
			cancel2()
		}
		cancel()
		n := 0
		for _, e := range srv.Log() {
			if e.Key == t.key || strings.HasPrefix(e.Key, t.key+"/") { // sub-keys: see request
				n++
			}
		}
		return n
	}
	if sc.h2 != nil {
		h2, err := faultserver.NewH2(faultserver.H2Config{Faults: sc.h2})
		if err != nil {
			return row{}, err
		}
		defer h2.Close()
		t.base, t.count = h2.URL(), h2.Streams
		transport.Protocols = new(http.Protocols)
		transport.Protocols.SetUnencryptedHTTP2(true)
	}
	t.client = &http.Client{
		Transport:     stack.Then(transport),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer t.client.CloseIdleConnections()
	t.over = func(base http.RoundTripper) (http.RoundTripper, error) {
		s, err := buildStack(names, sc, presetName, t)
		if err != nil {
			return nil, err
		}
		return s.Then(base), nil
	}
	t.newClient = func() (*http.Client, error) {
		rt, err := t.over(&http.Transport{})
		if err != nil {
			return nil, err
		}
		return &http.Client{Transport: rt, CheckRedirect: t.client.CheckRedirect}, nil
	}

	sc.run(t)

	got := figures{PlannedWaitsMS: []int64{}, Extra: t.extra, Result: "-"}
	for _, o := range t.ops {
		got.ServerRequests = append(got.ServerRequests, o.requests)
	}
	if t.subject < len(t.ops) {
		subject := t.ops[t.subject]
		got.Result = subject.result
		got.Stop = subject.stop
		if rep := subject.report; rep != nil {
			got.Stop = string(rep.Stop)
			for _, w := range rep.PlannedWaits {
				got.PlannedWaitsMS = append(got.PlannedWaitsMS, w.Milliseconds())
			}
			if p := pitfalls(rep); p != "" {
				got.Extra["pitfalls"] = p
			}
			if n := rep.TransparentAttempts(); n > 0 {
				got.Extra["transparent_attempts"] = strconv.Itoa(n)
			}
			if t.recordElapsed {
				got.Extra["elapsed_ms"] = strconv.FormatInt(rep.Elapsed.Milliseconds(), 10)
			}
		}
	}
	return row{sc: sc, preset: presetName, stack: stack.String(), got: got, deviations: compare(sc.want, got)}, nil
}

// pitfalls lists the report's pitfalls once each, in order.
func pitfalls(rep *engine.Report) string {
	var names []string
	for _, p := range rep.Pitfalls {
		if !slices.Contains(names, string(p)) {
			names = append(names, string(p))
		}
	}
	return strings.Join(names, ",")
}

// trial is one run of a scenario: its client and the operations it sent.
type trial struct {
	tel           *telemetry.Telemetry // nil without -otlp
	ctx           context.Context
	cancel        context.CancelFunc
	client        *http.Client
	srv           *faultserver.Server
	base          string     // the server's base URL
	key           string     // isolates this trial's requests on the shared server
	count         func() int // requests the server has seen from this trial
	ops           []op
	subject       int  // index of the operation whose result the row reports
	recordElapsed bool // report the subject's elapsed_ms
	extra         map[string]string
	clock         labClock // the time of the row's breaker
	// newClient builds another client like the caller's (the row's preset
	// and stack), for the services of a chain row.
	newClient func() (*http.Client, error)
	// over is the row's stack (its preset, layers and order) over base: a
	// service of the row's own, in process.
	over func(base http.RoundTripper) (http.RoundTripper, error)
	// signalled is closed by signal, which a row's hooks may call for its
	// run to wait on an event of the client, not on a clock.
	signalled  chan struct{}
	signalOnce sync.Once
}

func (t *trial) signal() { t.signalOnce.Do(func() { close(t.signalled) }) }

// fail records that the row could not run as set up.
func (t *trial) fail(err error) { t.extra["cannot_run"] = err.Error() }

// op is one logical operation of a trial.
type op struct {
	requests int            // requests the server saw during it
	result   string         // final status code, or "error"
	report   *engine.Report // nil without a retry layer
	stop     string         // the stop when there is no report, if known
}

// send performs one logical operation and returns the response body.
// body, when not empty, is sent replayably (GetBody is set); header is a
// list of name, value pairs.
func (t *trial) send(method, path, body string, header ...string) (status int, respBody string, err error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return t.do(method, path, rd, header...)
}

// stream sends body as a stream: the request has no GetBody, so it cannot
// be replayed.
func (t *trial) stream(method, path, body string) (status int, respBody string, err error) {
	return t.do(method, path, io.NopCloser(strings.NewReader(body)))
}

// forget drops the operations recorded so far: they set the scene.
func (t *trial) forget() { t.ops = nil }

func (t *trial) do(method, path string, rd io.Reader, header ...string) (status int, respBody string, err error) {
	before := t.count()
	status, respBody, rep, err := t.request(t.ctx, method, path, rd, header...)
	o := op{report: rep, requests: t.count() - before, result: strconv.Itoa(status)}
	if err != nil {
		o.result = "error"
		if _, open := errors.AsType[*breaker.OpenError](err); open && rep == nil {
			o.stop = string(policy.StopCircuitOpen) // a breaker outside the retry layer: no report
		}
	}
	t.ops = append(t.ops, o)
	return status, respBody, err
}

// request sends one request through the trial's client without recording
// an operation, for rows whose operation is made of several (a stream).
// A path ending in "?key=..." or "&key=..." keeps its own key: a sub-key
// "<trial key>/..." is counted with the trial.
func (t *trial) request(ctx context.Context, method, path string, rd io.Reader, header ...string) (status int, respBody string, rep *engine.Report, err error) {
	return t.requestTo(ctx, method, t.url(path), rd, header...)
}

// requestURL sends a GET to rawURL, a server of the row's own.
func (t *trial) requestURL(ctx context.Context, rawURL string) (status int, respBody string, rep *engine.Report, err error) {
	return t.requestTo(ctx, http.MethodGet, rawURL, nil)
}

func (t *trial) requestTo(ctx context.Context, method, rawURL string, rd io.Reader, header ...string) (status int, respBody string, rep *engine.Report, err error) {
	return t.requestVia(ctx, t.client, method, rawURL, rd, header...)
}

// requestVia is requestTo through c, a client other than the trial's (a
// row's own: an SDK's over NewTransport).
func (t *trial) requestVia(ctx context.Context, c *http.Client, method, rawURL string, rd io.Reader, header ...string) (status int, respBody string, rep *engine.Report, err error) {
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return 0, "", nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", engine.ReportFrom(err), err
	}
	rep = engine.ReportOf(resp)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), rep, err
}

// measure records fn as one logical operation: the requests the server saw
// during it, its result and its report.
func (t *trial) measure(fn func() (result string, rep *engine.Report)) {
	before := t.count()
	result, rep := fn()
	t.ops = append(t.ops, op{requests: t.count() - before, result: result, report: rep})
}

// url adds the trial's key to path, which is relative to the server or,
// to name another origin, a whole URL.
func (t *trial) url(path string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	if !strings.HasPrefix(path, "http") {
		path = t.base + path
	}
	if strings.Contains(path, "?key=") || strings.Contains(path, "&key=") {
		return path
	}
	return path + sep + "key=" + url.QueryEscape(t.key)
}

// compare lists how got differs from want, in the notation of
// scenarios.tsv.
func compare(want expect, got figures) []string {
	var d []string
	if want.requests != "-" && want.requests != ints(got.ServerRequests) {
		d = append(d, fmt.Sprintf("server_requests %s, want %s", ints(got.ServerRequests), want.requests))
	}
	if !oneOf(want.result, got.Result) {
		d = append(d, fmt.Sprintf("result %s, want %s", got.Result, want.result))
	}
	if !oneOf(want.stop, dash(got.Stop)) {
		d = append(d, fmt.Sprintf("stop %s, want %s", dash(got.Stop), want.stop))
	}
	for _, kv := range extraPairs(want.extra) {
		k, v, _ := strings.Cut(kv, "=")
		var ok bool
		var have string
		switch {
		case k == "planned_waits_ms":
			have = ints(got.PlannedWaitsMS)
			ok = have == v
		case k == "elapsed_under_ms":
			have = got.Extra["elapsed_ms"]
			n, err1 := strconv.Atoi(have)
			limit, err2 := strconv.Atoi(v)
			ok = err1 == nil && err2 == nil && n < limit
		case strings.HasSuffix(k, "_under"): // the figure must stay under the limit
			have = got.Extra[strings.TrimSuffix(k, "_under")]
			n, err1 := strconv.ParseFloat(have, 64)
			limit, err2 := strconv.ParseFloat(v, 64)
			ok = err1 == nil && err2 == nil && n < limit
		case strings.HasSuffix(k, "_over"): // the figure must stay over the limit
			have = got.Extra[strings.TrimSuffix(k, "_over")]
			n, err1 := strconv.ParseFloat(have, 64)
			limit, err2 := strconv.ParseFloat(v, 64)
			ok = err1 == nil && err2 == nil && n > limit
		case k == "pitfalls": // the row's pitfalls must all be reported
			have = got.Extra[k]
			ok = subset(v, have)
		default:
			have = got.Extra[k]
			ok = have == v || oneOf(v, have) // "a|b": either
		}
		if !ok {
			d = append(d, fmt.Sprintf("%s %q, want %q", k, have, v))
		}
	}
	return d
}

func oneOf(want, got string) bool {
	return want == "-" || slices.Contains(strings.Split(want, "|"), got)
}

// extraPairs splits "k=v;k=v" at the semicolons that start a new key; a
// value may itself hold "; " (a Cookie header).
func extraPairs(extra string) []string {
	if extra == "-" || extra == "" {
		return nil
	}
	var out []string
	for _, part := range strings.Split(extra, ";") {
		if len(out) > 0 && strings.HasPrefix(part, " ") {
			out[len(out)-1] += ";" + part
			continue
		}
		out = append(out, part)
	}
	return out
}

// subset reports whether every item of the comma list a is in the list b.
func subset(a, b string) bool {
	have := strings.Split(b, ",")
	for _, x := range strings.Split(a, ",") {
		if !slices.Contains(have, x) {
			return false
		}
	}
	return true
}

func ints[T int | int64](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(int64(x), 10)
	}
	return strings.Join(s, ",")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
