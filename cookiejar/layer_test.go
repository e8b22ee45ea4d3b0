package cookiejar_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) {
	t.Run("jar", func(t *testing.T) {
		rttest.Contract(t, cookiejar.Layer(cookiejar.Config{Jar: cookiejar.NewJar()}).Wrap)
	})
}

// Without a jar the layer is only a name: it hands the next RoundTripper
// back, so nothing is stored, nothing sent and nothing spent.
func TestNoJarWrapsNothing(t *testing.T) {
	base := &rttest.Base{}
	if rt := cookiejar.Layer(cookiejar.Config{}).Wrap(base); rt != http.RoundTripper(base) {
		t.Errorf("the layer without a jar wraps the base in a %T", rt)
	}
}

// naive retries 503 whatever the method, at once: seed 003's classifier.
func naive() policy.Policy {
	p := presets.ReqwestForHost("127.0.0.1")
	p.Classify = policy.Rules{Statuses: policy.NewStatusSet(503), Safe: func(*http.Request) bool { return true }}.Classify
	return p
}

type run struct {
	me       string   // what /me received
	lost     []string // cookie-lost event names
	pitfalls []engine.Pitfall
}

// loginThenMe sends POST /login, then GET /me, through the named layers in
// order over a fresh fault server.
func loginThenMe(t *testing.T, cfg cookiejar.Config, order ...string) run {
	t.Helper()
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var r run
	e, err := engine.New(engine.Config{Policy: naive(), Hooks: engine.Hooks{OnPitfall: func(ev engine.Event) {
		r.pitfalls = append(r.pitfalls, ev.Pitfall)
		if ev.Pitfall == engine.PitfallCookieLost {
			r.lost = append(r.lost, ev.Cookies...)
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Jar = cookiejar.NewJar()
	all, err := middleware.NewStack(cookiejar.Layer(cfg), e.Layer())
	if err != nil {
		t.Fatal(err)
	}
	s, err := all.Select(order...)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: s.Then(tr)}
	for _, step := range []struct{ method, path string }{{"POST", "/login"}, {"GET", "/me"}} {
		req, _ := http.NewRequestWithContext(context.Background(), step.method, srv.URL()+step.path, strings.NewReader("u=a"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if step.path == "/me" {
			r.me = string(b)
		}
	}
	return r
}

func TestCookieLoss(t *testing.T) {
	tests := []struct {
		name  string
		cfg   cookiejar.Config
		order []string
		want  run
	}{
		{"reqwest's order loses the cookie and says so", cookiejar.Config{DropDiscarded: true}, []string{"cookies", "retry"},
			run{me: "session=abc", lost: []string{"lb"}, pitfalls: []engine.Pitfall{engine.PitfallNonIdempotentRetried, engine.PitfallCookieLost}}},
		{"by default the layer keeps it", cookiejar.Config{}, []string{"cookies", "retry"},
			run{me: "lb=node-2; session=abc", pitfalls: []engine.Pitfall{engine.PitfallNonIdempotentRetried}}},
		{"cookies inside retry see every attempt", cookiejar.Config{}, []string{"retry", "cookies"},
			run{me: "lb=node-2; session=abc", pitfalls: []engine.Pitfall{engine.PitfallNonIdempotentRetried}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loginThenMe(t, tt.cfg, tt.order...)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(run{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The layer adds the jar's cookies to what the caller set, without
// touching the caller's request, and stores what the response sets.
func TestJarPerRequest(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	jar := cookiejar.NewJar()
	s, _ := middleware.NewStack(cookiejar.Layer(cookiejar.Config{Jar: jar}))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: s.Then(tr)}

	for range 2 { // 503 + lb, then 200 + session
		resp, err := c.Post(srv.URL()+"/login", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest("GET", srv.URL()+"/me", nil)
	req.Header.Set("Cookie", "own=1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := string(b), "own=1; lb=node-2; session=abc"; got != want {
		t.Errorf("/me got %q, want %q", got, want)
	}
	if got := req.Header.Get("Cookie"); got != "own=1" {
		t.Errorf("caller's Cookie header changed to %q", got)
	}
	u := req.URL
	if n := len(jar.Cookies(u)); n != 2 {
		t.Errorf("jar holds %d cookies for %s, want 2", n, u)
	}
}

// Behind the redirect layer, every hop passes through the cookie layer: a
// cookie set by one hop is sent on the next.
func TestCookiesPerRedirectHop(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s, err := middleware.NewStack(redirect.Layer(redirect.Config{}), cookiejar.Layer(cookiejar.Config{Jar: cookiejar.NewJar()}))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: s.Then(tr)}
	resp, err := c.Get(srv.URL() + "/redirect/302/3?cookie=c")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var got []string
	for _, e := range srv.Log() {
		got = append(got, e.Cookie)
	}
	if diff := cmp.Diff([]string{"", "c=hop3", "c=hop2", "c=hop1"}, got); diff != "" {
		t.Errorf("Cookie on each hop (-want +got):\n%s", diff)
	}
}
