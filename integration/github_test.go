package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v75/github"
	"github.com/retrystack/retrystack"
)

// fakeGitHub serves the few endpoints the tests call, the way api.github.com
// answers them.
func fakeGitHub(t *testing.T, seen *log) *httptest.Server {
	t.Helper()
	var repo502 atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r", func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path)
		if repo502.Add(1) == 1 {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, `{"id": 1, "name": "r", "full_name": "o/r"}`)
	})
	mux.HandleFunc("GET /orgs/o/repos", func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path + "?" + r.URL.RawQuery)
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		if page < 3 {
			next := *r.URL
			q := next.Query()
			q.Set("page", strconv.Itoa(page+1))
			next.RawQuery = q.Encode()
			w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, next.RequestURI()))
		}
		fmt.Fprintf(w, `[{"id": %d, "name": "r%d"}]`, page, page)
	})
	mux.HandleFunc("GET /repos/o/limited", func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path)
		w.Header().Set("X-Ratelimit-Limit", "60")
		w.Header().Set("X-Ratelimit-Remaining", "0")
		w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message": "API rate limit exceeded"}`)
	})
	mux.HandleFunc("GET /repos/o/r/actions/runs/7/logs", func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path)
		http.Redirect(w, r, "/blobs/logs-7.zip", http.StatusFound)
	})
	mux.HandleFunc("GET /blobs/", func(w http.ResponseWriter, r *http.Request) { seen.add(r.URL.Path) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func githubClient(t *testing.T, srv *httptest.Server, hc *http.Client) *github.Client {
	t.Helper()
	c := github.NewClient(hc)
	u, _ := url.Parse(srv.URL + "/")
	c.BaseURL = u
	return c
}

// go-github over NewTransport, as an SDK should take it: a 502 is retried,
// pagination follows its Link headers, a rate-limit answer keeps
// go-github's own error type and is sent once, and the logs endpoint gets
// its 302 (go-github calls Transport.RoundTrip itself and reads Location).
func TestGitHubOverNewTransport(t *testing.T) {
	var seen log
	srv := fakeGitHub(t, &seen)
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: fast(), Transport: transport(t)})
	if err != nil {
		t.Fatal(err)
	}
	gh := githubClient(t, srv, &http.Client{Transport: rt})
	ctx := context.Background()

	repo, _, err := gh.Repositories.Get(ctx, "o", "r")
	if err != nil || repo.GetFullName() != "o/r" {
		t.Fatalf("Get: %v, %v", repo, err)
	}

	var names []string
	opt := &github.RepositoryListByOrgOptions{ListOptions: github.ListOptions{PerPage: 1}}
	for {
		repos, resp, err := gh.Repositories.ListByOrg(ctx, "o", opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range repos {
			names = append(names, r.GetName())
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if fmt.Sprint(names) != "[r1 r2 r3]" {
		t.Errorf("pages %v", names)
	}

	_, _, err = gh.Repositories.Get(ctx, "o", "limited")
	var rle *github.RateLimitError
	if !errors.As(err, &rle) || rle.Rate.Remaining != 0 {
		t.Errorf("rate limit: %T %v, want a *github.RateLimitError", err, err)
	}

	logs, _, err := gh.Actions.GetWorkflowRunLogs(ctx, "o", "r", 7, 1)
	if err != nil || logs.Path != "/blobs/logs-7.zip" {
		t.Errorf("logs URL %v, %v", logs, err)
	}

	want := []string{"/repos/o/r", "/repos/o/r", // the 502, then the retry
		"/orgs/o/repos?per_page=1", "/orgs/o/repos?page=2&per_page=1", "/orgs/o/repos?page=3&per_page=1",
		"/repos/o/limited",               // once: its rate limit resets in an hour, past RetryAfter.Max (wait-exceeds-budget)
		"/repos/o/r/actions/runs/7/logs"} // the 302 is go-github's, never followed
	if diff := cmp.Diff(want, seen.get()); diff != "" {
		t.Errorf("what the server saw (-want +got):\n%s", diff)
	}
}

// NewClient follows redirects inside its Transport, which is what a
// browser-like client wants and what go-github's logs endpoint cannot take:
// it calls Transport.RoundTrip and expects the 302. README says so; this
// pins it.
func TestGitHubLogsNeedNewTransport(t *testing.T) {
	var seen log
	srv := fakeGitHub(t, &seen)
	c, err := retrystack.NewClient(retrystack.Config{Policy: fast(), Transport: transport(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = githubClient(t, srv, c).Actions.GetWorkflowRunLogs(context.Background(), "o", "r", 7, 1)
	if err == nil {
		t.Fatal("the logs endpoint worked through NewClient's Transport: update README's advice")
	}
}
