package nginxtest

import (
	"io"
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The harness starts nginx on a port of its own, logs every request in
// its format, and stops it: over HTTP/1.1 and h2c.
func TestStartAndLog(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		if h2 {
			name = "h2c"
		}
		t.Run(name, func(t *testing.T) {
			s := Start(t, Config{HTTP2: h2, Server: `location /x { return 201 "made\n"; }`})
			tr := &http.Transport{}
			if h2 {
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetUnencryptedHTTP2(true)
			}
			defer tr.CloseIdleConnections()
			for range 2 {
				resp, err := (&http.Client{Transport: tr}).Post(s.URL+"/x?q=1", "text/plain", nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					t.Fatalf("status %d", resp.StatusCode)
				}
			}
			es := s.Wait(t, "/x", 2)
			proto := "HTTP/1.1"
			if h2 {
				proto = "HTTP/2.0"
			}
			if len(es) != 2 || es[0].Method != "POST" || es[0].Status != 201 || es[0].UpstreamStatus != "-" || es[0].Protocol != proto || es[1].Conn != es[0].Conn || es[1].ConnRequests != 2 {
				t.Fatalf("entries:\n%s", Format(es))
			}
			if all := s.Entries(t); len(all) != 2 {
				t.Fatalf("the barrier was logged:\n%s", Format(all))
			}
		})
	}
}
