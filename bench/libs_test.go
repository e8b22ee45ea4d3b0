package bench

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/faultserver"
)

// Every client the comparisons build, at its defaults and guarded, makes a
// GET through a real transport: a configuration that cannot be built or
// does not send would otherwise show only as a missing row.
func TestEveryClientSends(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(t *testing.T, c *http.Client) {
		t.Helper()
		resp, err := c.Get(srv.URL() + "/s/200?size=64")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != 64 {
			t.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
		c.CloseIdleConnections()
	}
	for _, set := range [][]Lib{Libs, Hedgers} {
		for _, lib := range set {
			t.Run(lib.Name, func(t *testing.T) {
				c, err := lib.New(&http.Transport{}, Mode{})
				if err != nil {
					t.Fatal(err)
				}
				get(t, c)
			})
		}
	}
	for _, set := range []struct {
		name string
		os   []Overloader
	}{{"metastable", Overloaders}, {"fleet", FleetLibs}, {"lone", LoneConfigs}} {
		for _, o := range set.os {
			for _, to := range []time.Duration{time.Minute, 0} { // 0: no attempt timeout, as in the chaos cell
				if to == 0 && o.Name == Overloaders[0].Name {
					continue // the naive client always has one
				}
				t.Run(fmt.Sprintf("%s/%s/%v", set.name, o.Name, to), func(t *testing.T) {
					tr := &http.Transport{}
					rt, err := o.New(tr, to)
					if err != nil {
						t.Fatal(err)
					}
					get(t, &http.Client{Transport: rt})
					tr.CloseIdleConnections()
				})
			}
		}
	}
}
