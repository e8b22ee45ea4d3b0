package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
)

// fieldRows are faults of the field, met inside the SDKs and proxies the
// library is embedded behind, under retrystack's defaults.
var fieldRows = []scenario{
	{
		id:     "field/h2-reset-get",
		setup:  "policy.Default(); an h2c server resets the first stream with RST_STREAM(INTERNAL_ERROR) after reading the request (what a reverse proxy does when its upstream fails), then answers 200; one GET",
		preset: "default", h2: []faultserver.H2Fault{faultserver.H2ResetInternalError}, run: get("/"),
		want: expect{"2", "200", "success", "-"},
		note: "the request was sent and got no response, as when an HTTP/1.1 connection is reset: an idempotent request is retried (RFC 9110 §9.2.2).",
	},
	{
		id:     "field/h2-reset-post",
		setup:  "the same server; one POST without an Idempotency-Key, which the server may have processed",
		preset: "default", h2: []faultserver.H2Fault{faultserver.H2ResetInternalError},
		run:  func(t *trial) { t.send("POST", "/", "bytes") },
		want: expect{"1", "error", "not-idempotent", "-"},
		note: "the same reset; the POST may have had its effect, so it is not resent.",
	},
	{
		id:     "field/cookie-under-transport",
		setup:  "an http.Client with its own cookie jar over NewTransport(Config{}); POST /login with an Idempotency-Key: 503 with Set-Cookie lb=node-2, retried, then 200 with Set-Cookie session=abc; then GET /me (the subject is the login). extra me_cookie is the Cookie header /me received",
		preset: "default", run: cookieUnderTransport,
		want: expect{"2,1", "200", "success", "me_cookie=lb=node-2; session=abc|session=abc; lb=node-2"},
		note: "NewTransport keeps no cookies: the retry layer carries the Set-Cookie of the response it threw away onto the one it hands back, and the http.Client's jar stores both.",
	},
	{
		id:     "field/signals-third-party",
		setup:  "NewTransport(Config{}), no host named for the cross-layer protocol; GET: 503, then 200. extra signal_headers counts the Retrystack-* request headers the server received",
		preset: "default", run: signalsToThirdParty,
		want: expect{"2", "200", "success", "signal_headers=0"},
		note: "the protocol's headers go only to the hosts Signals.To names: S3, Stripe or any third party gets none, and cannot stop retries with one.",
	},
	{
		id:     "field/stream-body-replayed",
		setup:  "policy.Default(); a PUT whose body is a 100 KiB stream with neither GetBody nor Seek (what aws-sdk-go-v2 and minio-go send); 503, then 200. extra body_intact is true when the server received the same bytes both times",
		preset: "default", run: putOnce(func(*trial) (io.Reader, error) { return io.NopCloser(bytes.NewReader(pattern(100 << 10))), nil }),
		want: expect{"2", "200", "success", "body_intact=true"},
		note: "the body is kept as it is sent (up to 256 KiB a request, 16 MiB a client: gRPC's limits), and the retry sends what was kept.",
	},
	{
		id:     "field/stream-body-over-buffer",
		setup:  "the same with a 32 MiB stream, larger than the replay buffer: the operation commits after the first send",
		preset: "default", run: putOnce(func(*trial) (io.Reader, error) { return io.NopCloser(bytes.NewReader(pattern(32 << 20))), nil }),
		want: expect{"1", "503", "body-not-replayable", "-"},
		note: "never an unbounded copy: past the buffer the body is sent once, and the 503 is the answer.",
	},
	{
		id:     "field/seekable-body-rewound",
		setup:  "policy.Default(); a PUT whose body is a 1 MiB *os.File (it can Seek; http.NewRequest gives it no GetBody); 503, then 200",
		preset: "default", run: putOnce(tempFile),
		want: expect{"2", "200", "success", "body_intact=true"},
		note: "a body that can Seek is read again from where it started: nothing is kept.",
	},
	{
		id:     "field/upload-reset-mid-body",
		setup:  "policy.Default(); 20 sequential PUTs, each with a 2 MiB body net/http can replay (GetBody); the server reads 64 KiB of each first attempt, then resets the connection, and answers 200 to the second. extra not_retried counts the PUTs that were not retried",
		preset: "default", run: uploadsReset,
		want: expect{"-", "200", "success", "not_retried=0"},
		note: "net/http reads and writes on two goroutines: whichever meets the reset first, it is the same reset, retried the same way.",
	},
}

// uploadsReset sends 20 PUTs of 2 MiB that the server resets after 64 KiB
// the first time.
func uploadsReset(t *trial) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 2<<20/16)
	notRetried := 0
	for i := range 20 {
		sub := url.QueryEscape(fmt.Sprintf("%s/put-%d", t.key, i))
		before := t.count()
		status, _, err := t.do("PUT", "/upload?key="+sub, bytes.NewReader(body))
		if err != nil || status != 200 || t.count()-before != 2 {
			notRetried++
		}
	}
	t.extra["not_retried"] = strconv.Itoa(notRetried)
}

// signalsToThirdParty sends a GET through NewTransport with its defaults
// and counts the protocol's headers the server received.
func signalsToThirdParty(t *trial) {
	c := transportClient(t, nil)
	if c == nil {
		return
	}
	defer c.CloseIdleConnections()
	t.measure(func() (string, *engine.Report) {
		status, _, rep, err := t.requestVia(t.ctx, c, "GET", t.url("/fail/1/503"), nil)
		if err != nil {
			return "error", rep
		}
		return strconv.Itoa(status), rep
	})
	n := 0
	for _, e := range t.srv.Log() {
		if e.Key == t.key {
			n += e.Signals
		}
	}
	t.extra["signal_headers"] = strconv.Itoa(n)
}

// pattern is n bytes of a repeating pattern.
func pattern(n int) []byte { return bytes.Repeat([]byte("0123456789abcdef"), n/16) }

// tempFile is a 1 MiB file, open for reading, removed once closed over.
func tempFile(t *trial) (io.Reader, error) {
	f, err := os.CreateTemp("", "retrylab-upload-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // the open file stays readable
	if _, err := f.Write(pattern(1 << 20)); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// putOnce sends one PUT with body to a route that answers 503 once, then
// 200, and says whether the server received the same bytes each time.
func putOnce(body func(*trial) (io.Reader, error)) func(*trial) {
	return func(t *trial) {
		rd, err := body(t)
		if err != nil {
			t.fail(err)
			return
		}
		t.do("PUT", "/fail/1/503", rd)
		var sums []string
		for _, e := range t.srv.Log() {
			if e.Key == t.key {
				sums = append(sums, e.BodySum)
			}
		}
		intact := len(sums) > 0 && sums[0] != ""
		for _, s := range sums {
			intact = intact && s == sums[0]
		}
		t.extra["body_intact"] = strconv.FormatBool(intact)
	}
}

// cookieUnderTransport logs in through NewTransport under an http.Client
// with a jar, then asks /me which cookies it got.
func cookieUnderTransport(t *trial) {
	jar, _ := cookiejar.New(nil)
	c := transportClient(t, jar)
	if c == nil {
		return
	}
	defer c.CloseIdleConnections()
	send := func(method, path, body string, header ...string) (string, string, *engine.Report) {
		status, b, rep, err := t.requestVia(t.ctx, c, method, t.url(path), strings.NewReader(body), header...)
		if err != nil {
			return "error", "", rep
		}
		return strconv.Itoa(status), b, rep
	}
	t.measure(func() (string, *engine.Report) {
		status, _, rep := send("POST", "/login", "user=a", "Idempotency-Key", `"login-1"`)
		return status, rep
	})
	t.measure(func() (string, *engine.Report) {
		status, me, rep := send("GET", "/me", "")
		t.extra["me_cookie"] = me
		return status, rep
	})
}

// transportClient is what an SDK builds over NewTransport with its
// defaults: an http.Client, with jar when one is given; nil when the
// transport cannot be built (recorded as the row's failure).
func transportClient(t *trial, jar http.CookieJar) *http.Client {
	rt, err := retrystack.NewTransport(retrystack.Config{})
	if err != nil {
		t.fail(err)
		return nil
	}
	return &http.Client{Transport: rt, Jar: jar}
}
