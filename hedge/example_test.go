package hedge_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/hedge"
)

// A slow first send is hedged: after Delay a second copy goes out, and the
// first answer to arrive is the response; the slower send is cancelled.
func ExampleLayer() {
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := sends.Add(1)
		if n == 1 {
			<-r.Context().Done() // the first send hangs until it is cancelled
			return
		}
		fmt.Fprintf(w, "answered by send %d", n)
	}))
	defer srv.Close()

	stack, _ := retrystack.NewStack(retrystack.Config{})
	stack, err := stack.InsertAfter("retry", hedge.Layer(hedge.Config{Delay: time.Millisecond}))
	if err != nil {
		fmt.Println(err)
		return
	}
	client := retrystack.Client(stack, nil)
	defer client.CloseIdleConnections()
	fmt.Println(stack)
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// redirect → cookies → retry → hedge → transport
	// 200 answered by send 2
}
