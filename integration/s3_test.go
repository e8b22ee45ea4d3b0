package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
)

var s3Creds = credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "")

// faultProxy sits in front of an in-process S3: it answers 503 to the
// first request of each path and method it is told to fail (the request
// read, never forwarded), forwards the others, counts what reached S3, and
// checks the SigV4 signature of every request it receives, retries
// included.
type faultProxy struct {
	t       *testing.T
	next    http.Handler
	sigv4   bool              // check every request's SigV4 signature
	resign  bool              // by signing it again too (aws-sdk-go-v2's signer signs what its SDK signs)
	first   map[string]string // method+path: the first request's signed form
	mu      sync.Mutex
	fail    map[string]bool // method+path: fail its first request
	reached map[string]int  // method+path: requests forwarded
	badSig  []string
	checked int      // signatures checked
	headers []string // Retrystack-* headers received
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	key := r.Method + " " + r.URL.Path
	p.mu.Lock()
	if p.sigv4 {
		// A retry sends the request the SDK signed, unchanged: the same
		// signature over the same signed headers and body.
		form := signedForm(r, body)
		if f, ok := p.first[key]; !ok {
			p.first[key] = form
		} else if f != form {
			p.badSig = append(p.badSig, key+": changed since the first send")
		}
		if p.resign {
			if err := checkSigV4(r, body); err != "" {
				p.badSig = append(p.badSig, key+": "+err)
			}
		}
		p.checked++
	}
	for k := range r.Header {
		if strings.HasPrefix(k, "Retrystack-") {
			p.headers = append(p.headers, k)
		}
	}
	fail := p.fail[key]
	p.fail[key] = false
	if !fail {
		p.reached[key]++
	}
	p.mu.Unlock()
	if fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	p.next.ServeHTTP(w, r)
}

func newFaultProxy(t *testing.T, next http.Handler, sigv4 bool) *faultProxy {
	return &faultProxy{t: t, next: next, sigv4: sigv4, fail: map[string]bool{}, reached: map[string]int{}, first: map[string]string{}}
}

// signedForm is what a SigV4 signature covers in r: the Authorization,
// the values of the headers it names, and the body.
func signedForm(r *http.Request, body []byte) string {
	auth := r.Header.Get("Authorization")
	_, signed, _ := strings.Cut(auth, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	var b strings.Builder
	b.WriteString(auth)
	for _, h := range strings.Split(signed, ";") {
		b.WriteString("\n" + h + ":" + strings.Join(r.Header.Values(h), ","))
	}
	sum := sha256.Sum256(body)
	b.WriteString("\n" + hex.EncodeToString(sum[:]))
	return b.String()
}

// failFirst makes the next request of method and path fail with a 503.
func (p *faultProxy) failFirst(method, path string) {
	p.mu.Lock()
	p.fail[method+" "+path] = true
	p.mu.Unlock()
}

// count is how many requests of method and path reached the server.
func (p *faultProxy) count(method, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reached[method+" "+path]
}

// checkSigV4 signs a copy of r again, with the headers its Authorization
// names and the time it was signed at, and compares: "" when they match.
func checkSigV4(r *http.Request, body []byte) string {
	auth := r.Header.Get("Authorization")
	_, signed, ok := strings.Cut(auth, "SignedHeaders=")
	if !ok {
		return "no SigV4 Authorization"
	}
	signed, _, _ = strings.Cut(signed, ",")
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "no X-Amz-Date"
	}
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	c, _ := http.NewRequest(r.Method, u.String(), bytes.NewReader(body))
	c.Host = r.Host
	c.Header = http.Header{}
	for _, h := range strings.Split(signed, ";") {
		switch h {
		case "host":
		case "content-length":
			c.ContentLength = r.ContentLength
		default:
			c.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	c.ContentLength = r.ContentLength
	creds, _ := s3Creds.Retrieve(context.Background())
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, c, r.Header.Get("X-Amz-Content-Sha256"), "s3", "us-east-1", at); err != nil {
		return err.Error()
	}
	if got := c.Header.Get("Authorization"); got != auth {
		return "signature mismatch"
	}
	return ""
}

// aws-sdk-go-v2's S3 client over NewTransport, its own retries off, behind
// a proxy that fails the first PutObject: the upload (a body without
// GetBody) is replayed and arrives whole, sent no more often than the
// policy allows, still validly signed; nothing of the cross-layer protocol
// reaches S3.
func TestS3ThroughNewTransport(t *testing.T) {
	backend := s3mem.New()
	s3srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer s3srv.Close()
	target, _ := url.Parse(s3srv.URL)
	fp := newFaultProxy(t, httputil.NewSingleHostReverseProxy(target), true)
	fp.resign = true
	front := httptest.NewServer(fp)
	defer front.Close()

	var reports []*engine.Report
	var mu sync.Mutex
	retries := 0
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: fast(), Transport: transport(t), Hooks: engine.Hooks{
		OnGiveUp: func(r *engine.Report) { mu.Lock(); reports = append(reports, r); mu.Unlock() },
		OnRetry: func(ev engine.Event) {
			mu.Lock()
			retries++
			if ev.Report.Attempts[0].Status != http.StatusServiceUnavailable {
				t.Errorf("retried after %d", ev.Report.Attempts[0].Status)
			}
			mu.Unlock()
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		Credentials:  s3Creds,
		BaseEndpoint: aws.String(front.URL),
		UsePathStyle: true,
		HTTPClient:   &http.Client{Transport: rt},
		Retryer:      aws.NopRetryer{}, // one retry loop, not two: 3 × 3 = 9 sends otherwise
	})
	ctx := context.Background()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("uploads")}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("retrystack "), 10_000) // 110 KB
	fp.failFirst("PUT", "/uploads/obj")
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("uploads"), Key: aws.String("obj"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("uploads"), Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Errorf("the object came back with %d bytes, not the %d sent", len(got), len(data))
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.reached["PUT /uploads/obj"] != 1 {
		t.Errorf("PutObject reached S3 %d times, want 1 (after one 503)", fp.reached["PUT /uploads/obj"])
	}
	if len(fp.badSig) > 0 || fp.checked != 4 {
		t.Errorf("%d requests checked (want 4: the bucket, the 503, the upload, the read); badly signed: %v", fp.checked, fp.badSig)
	}
	if len(fp.headers) > 0 {
		t.Errorf("S3 received cross-layer headers: %v", fp.headers)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 0 || retries != 1 {
		t.Errorf("%d retries, want 1; operations that gave up: %v", retries, reports)
	}
}
