package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystack/retrystack/faultserver"
	"github.com/retrystack/retrystack/middleware"
)

// A scenario is one row of the lab: a setup, the operations it sends, and
// the figures it must reproduce.
type scenario struct {
	id, setup      string
	preset         string                // retry preset, a key of presets
	stack          []string              // layer names, outermost first
	attemptTimeout time.Duration         // for the "timeout" layer
	h2             []faultserver.H2Fault // non-nil: run against a fresh h2c server with this script
	run            func(t *trial)
	want           figures
	note           string // why the row differs from the seed system, if it does
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
}

// presets are the retry presets the lab can apply. A preset decides the
// retry layer; "none" runs without one, as a bare net/http client does.
var presets = map[string]string{
	"none": "no retry layer: what net/http alone does",
}

func presetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// layerCatalogue lists every layer the lab can build, in the default order.
func layerCatalogue(sc scenario) []middleware.Layer {
	return []middleware.Layer{
		middleware.ErrorForStatus(0),
		middleware.Timeout(sc.attemptTimeout),
	}
}

// buildStack returns the named layers, configured for sc, in the given order.
func buildStack(names []string, sc scenario) (middleware.Stack, error) {
	all, err := middleware.NewStack(layerCatalogue(sc)...)
	if err != nil {
		return middleware.Stack{}, err
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

// runAll runs the scenarios one after the other against one HTTP/1.1 fault
// server (each scenario under its own key) and fresh h2c servers.
func runAll(ctx context.Context, selected []scenario, opts options) ([]row, error) {
	srv, err := faultserver.New()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	rows := make([]row, 0, len(selected))
	for _, sc := range selected {
		r, err := runOne(ctx, srv, sc, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", sc.id, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// scenarioTimeout bounds a scenario, so a broken one cannot hang the lab.
const scenarioTimeout = 30 * time.Second

func runOne(ctx context.Context, srv *faultserver.Server, sc scenario, opts options) (row, error) {
	names, preset := sc.stack, sc.preset
	if opts.stack != nil {
		names = opts.stack
	}
	if opts.preset != "" {
		preset = opts.preset
	}
	stack, err := buildStack(names, sc)
	if err != nil {
		return row{}, err
	}

	t := &trial{srv: srv, key: sc.id, base: srv.URL(), extra: map[string]string{}}
	t.count = func() int {
		n := 0
		for _, e := range srv.Log() {
			if e.Key == t.key {
				n++
			}
		}
		return n
	}
	transport := &http.Transport{}
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

	var cancel context.CancelFunc
	t.ctx, cancel = context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	sc.run(t)

	got := figures{PlannedWaitsMS: []int64{}, Extra: t.extra, Result: "-"}
	for _, o := range t.ops {
		got.ServerRequests = append(got.ServerRequests, o.requests)
	}
	if t.subject < len(t.ops) {
		got.Result = t.ops[t.subject].result
	}
	return row{sc: sc, preset: preset, stack: stack.String(), got: got, deviations: compare(sc.want, got)}, nil
}

// trial is one run of a scenario: its client and the operations it sent.
type trial struct {
	ctx     context.Context
	client  *http.Client
	srv     *faultserver.Server
	base    string     // the server's base URL
	key     string     // isolates this trial's requests on the shared server
	count   func() int // requests the server has seen from this trial
	ops     []op
	subject int // index of the operation whose result the row reports
	extra   map[string]string
}

// op is one logical operation of a trial.
type op struct {
	requests int    // requests the server saw during it
	result   string // final status code, or "error"
}

// send performs one logical operation and returns the response body.
// body, when not empty, is sent replayably (GetBody is set).
func (t *trial) send(method, path, body string) (status int, respBody string, err error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.ctx, method, t.url(path), rd)
	if err != nil {
		return 0, "", err
	}
	before := t.count()
	resp, err := t.client.Do(req)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		status, respBody = resp.StatusCode, string(b)
	}
	o := op{requests: t.count() - before, result: strconv.Itoa(status)}
	if err != nil {
		o.result = "error"
	}
	t.ops = append(t.ops, o)
	return status, respBody, err
}

// url adds the trial's key to path.
func (t *trial) url(path string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return t.base + path + sep + "key=" + url.QueryEscape(t.key)
}

// compare lists how got differs from want; "-" and empty fields of want are
// not checked.
func compare(want, got figures) []string {
	var d []string
	if !slices.Equal(want.ServerRequests, got.ServerRequests) {
		d = append(d, fmt.Sprintf("server_requests %s, want %s", ints(got.ServerRequests), ints(want.ServerRequests)))
	}
	if want.Result != "" && want.Result != "-" && want.Result != got.Result {
		d = append(d, fmt.Sprintf("result %s, want %s", got.Result, want.Result))
	}
	if want.Stop != "" && want.Stop != "-" && want.Stop != got.Stop {
		d = append(d, fmt.Sprintf("stop %q, want %q", got.Stop, want.Stop))
	}
	if want.PlannedWaitsMS != nil && !slices.Equal(want.PlannedWaitsMS, got.PlannedWaitsMS) {
		d = append(d, fmt.Sprintf("planned_waits_ms %s, want %s", ints(got.PlannedWaitsMS), ints(want.PlannedWaitsMS)))
	}
	for _, k := range sortedKeys(want.Extra) {
		if got.Extra[k] != want.Extra[k] {
			d = append(d, fmt.Sprintf("%s=%q, want %q", k, got.Extra[k], want.Extra[k]))
		}
	}
	return d
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
