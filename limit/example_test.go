package limit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/limit"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// A limit of one request in flight per host, inside the retry layer: a
// second request finds no room within its wait and is refused, nothing
// sent, with the limit's own stop reason.
func ExampleLayer() {
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	e, _ := engine.New(engine.Config{Policy: policy.Default()})
	stack, err := middleware.NewStack(e.Layer(), limit.Layer(limit.Config{Limit: 1, MaxWait: 20 * time.Millisecond}))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: stack.Then(tr)}
	fmt.Println(stack)

	first := make(chan int)
	go func() {
		resp, err := client.Get(srv.URL)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-arrived // the first holds the one place

	_, err = client.Get(srv.URL)
	fmt.Println("second:", engine.ReportFrom(err).Stop)
	close(release)
	fmt.Println("first:", <-first)
	// Output:
	// retry → limit → transport
	// second: concurrency-limited
	// first: 200
}
