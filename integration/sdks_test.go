package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-resty/resty/v2"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/telemetry"
	"github.com/stripe/stripe-go/v82"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// fakeS3 is an in-process S3 behind a fault proxy that checks SigV4.
func fakeS3(t *testing.T) (*faultProxy, string) {
	t.Helper()
	s3srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(s3srv.Close)
	target, _ := url.Parse(s3srv.URL)
	fp := newFaultProxy(t, httputil.NewSingleHostReverseProxy(target), true)
	front := httptest.NewServer(fp)
	t.Cleanup(front.Close)
	return fp, front.URL
}

// minio-go over NewTransport, its own retries off (MaxRetries: 1; 0 means
// its default, 10): a PutObject of a stream the proxy fails once is
// replayed whole and validly signed.
func TestMinioThroughNewTransport(t *testing.T) {
	fp, front := fakeS3(t)
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: fast(), Transport: transport(t)})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(front)
	creds, _ := s3Creds.Retrieve(context.Background())
	mc, err := minio.New(u.Host, &minio.Options{
		Creds:        miniocreds.NewStaticV4(creds.AccessKeyID, creds.SecretAccessKey, ""),
		Region:       "us-east-1",
		Transport:    rt,
		MaxRetries:   1,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := mc.MakeBucket(ctx, "minio-bucket", minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("minio "), 20_000) // 120 KB
	fp.failFirst("PUT", "/minio-bucket/obj")
	if _, err := mc.PutObject(ctx, "minio-bucket", "obj", io.NopCloser(bytes.NewReader(data)), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	obj, err := mc.GetObject(ctx, "minio-bucket", "obj", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj)
	obj.Close()
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Errorf("the object came back with %d bytes, not the %d sent", len(got), len(data))
	}
	if n := fp.count("PUT", "/minio-bucket/obj"); n != 1 {
		t.Errorf("PutObject reached S3 %d times, want 1 (after one 503)", n)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if len(fp.badSig) > 0 || len(fp.headers) > 0 {
		t.Errorf("badly signed: %v; cross-layer headers: %v", fp.badSig, fp.headers)
	}
}

// resty (whose retries are off by default) with NewTransport as its
// transport: a GET and a PUT of a stream, each failed once, retried once.
func TestRestyThroughNewTransport(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.Method] = string(b)
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	defer backend.Close()
	fp := newFaultProxy(t, backend.Config.Handler, false)
	front := httptest.NewServer(fp)
	defer front.Close()
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: fast(), Transport: transport(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := resty.New().SetTransport(rt)
	defer c.GetClient().CloseIdleConnections()
	fp.failFirst("GET", "/doc")
	fp.failFirst("PUT", "/doc")
	if resp, err := c.R().Get(front.URL + "/doc"); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("GET: %v, %v", resp, err)
	}
	if resp, err := c.R().SetBody(io.NopCloser(strings.NewReader("a stream"))).Put(front.URL + "/doc"); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("PUT: %v, %v", resp, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fp.count("GET", "/doc") != 1 || fp.count("PUT", "/doc") != 1 || got["PUT"] != "a stream" {
		t.Errorf("GETs %d, PUTs %d reached the server, PUT body %q; want 1, 1, the stream", fp.count("GET", "/doc"), fp.count("PUT", "/doc"), got["PUT"])
	}
}

// stripe-go with its network retries off, against a fake of its API: a
// customer created through a 503 is created once, and both sends carry
// the Idempotency-Key stripe-go made.
func TestStripeThroughNewTransport(t *testing.T) {
	var mu sync.Mutex
	created := map[string]int{} // by Idempotency-Key
	var keys []string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/customers" {
			http.NotFound(w, r)
			return
		}
		r.ParseForm()
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		created[key]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "cus_1", "object": "customer", "email": r.PostForm.Get("email")})
	})
	fp := newFaultProxy(t, api, false)
	recordKeys := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		fp.ServeHTTP(w, r)
	})
	front := httptest.NewServer(recordKeys)
	defer front.Close()
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: fast(), Transport: transport(t)})
	if err != nil {
		t.Fatal(err)
	}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(front.URL),
		HTTPClient:        &http.Client{Transport: rt},
		MaxNetworkRetries: stripe.Int64(0), // one retry loop, not two
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	sc := stripe.NewClient("sk_test_123", stripe.WithBackends(&stripe.Backends{API: backend, Connect: backend, Uploads: backend}))
	fp.failFirst("POST", "/v1/customers")
	cus, err := sc.V1Customers.Create(context.Background(), &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if cus.ID != "cus_1" || len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || created[keys[0]] != 1 {
		t.Errorf("customer %q; keys sent %q; created %v: want one customer, two sends under one key", cus.ID, keys, created)
	}
}

// A presigned S3 URL fetched through a stack with telemetry, failed once:
// the signature, the credential and the token never reach a span, a
// metric, the report or the error.
func TestPresignedURLSecretsStayOut(t *testing.T) {
	fp, front := fakeS3(t)
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tel, err := telemetry.New(telemetry.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	var mu sync.Mutex
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: fast(), Transport: transport(t), Telemetry: tel, Hooks: engine.Hooks{
		OnRetry: func(ev engine.Event) { mu.Lock(); reports = append(reports, ev.Report.String()); mu.Unlock() },
	}})
	if err != nil {
		t.Fatal(err)
	}
	withToken := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-of-a-role")
	client := s3.New(s3.Options{Region: "us-east-1", Credentials: withToken, BaseEndpoint: aws.String(front), UsePathStyle: true,
		HTTPClient: &http.Client{Transport: transport(t)}, Retryer: aws.NopRetryer{}})
	ctx := context.Background()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("presigned")}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("presigned"), Key: aws.String("o"), Body: strings.NewReader("secret data")}); err != nil {
		t.Fatal(err)
	}
	req, err := s3.NewPresignClient(client).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("presigned"), Key: aws.String("o")},
		s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(req.URL)
	secrets := []string{u.Query().Get("X-Amz-Signature"), u.Query().Get("X-Amz-Credential"), u.Query().Get("X-Amz-Security-Token")}
	if secrets[0] == "" || secrets[1] == "" || secrets[2] == "" {
		t.Fatalf("the presigned URL %q lacks a signature, credential or token", req.URL)
	}
	fp.failFirst("GET", "/presigned/o")
	hc := &http.Client{Transport: rt}
	resp, err := hc.Get(req.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "secret data" {
		t.Fatalf("body %q", body)
	}
	// And an error: a host that refuses connections.
	bad := strings.Replace(req.URL, u.Host, "127.0.0.1:1", 1)
	_, getErr := hc.Get(bad)
	if getErr == nil {
		t.Fatal("no error from a refused connection")
	}

	var seen []string
	for _, s := range spans.Ended() {
		seen = append(seen, s.Name())
		for _, kv := range s.Attributes() {
			seen = append(seen, kv.Value.String())
		}
		for _, e := range s.Events() {
			for _, kv := range e.Attributes {
				seen = append(seen, kv.Value.String())
			}
		}
		seen = append(seen, s.Status().Description)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rm)
	// net/http's *url.Error prints the URL it was given, the caller's own:
	// what the stack adds to it (an *engine.Error) must not.
	ee, ok := errors.AsType[*engine.Error](getErr)
	if !ok {
		t.Fatalf("%v is not an *engine.Error", getErr)
	}
	seen = append(seen, string(b), ee.Error())
	mu.Lock()
	seen = append(seen, reports...)
	if len(reports) == 0 {
		t.Error("no retry: the fault did not happen")
	}
	mu.Unlock()
	if rep := engine.ReportFrom(getErr); rep != nil {
		seen = append(seen, rep.String())
	}
	for _, secret := range secrets {
		for _, s := range seen {
			if strings.Contains(s, secret) || strings.Contains(s, url.QueryEscape(secret)) {
				t.Errorf("a secret of the presigned URL leaked: %q", s)
			}
		}
	}
}
