package bench

import (
	"slices"
	"testing"
)

func config(t *testing.T, name string) Overloader {
	t.Helper()
	i := slices.IndexFunc(LoneConfigs, func(o Overloader) bool { return o.Name == name })
	if i < 0 {
		t.Fatalf("no configuration %q", name)
	}
	return LoneConfigs[i]
}

// The lone cells of one or two operations, as the rules define them
// (counts only: no timing is asserted; each stall ends when its 200 ms
// attempt times out).
func TestLoneCells(t *testing.T) {
	for _, c := range []struct {
		config string
		// lone-first retried; lone-sdk's GET ends 200
		first, sdk bool
		// requests for 10 operations whose every attempt times out
		timeouts int
	}{
		{"retrystack, no budget", true, true, 30},
		{"retrystack, wave 4's budget", false, false, 10}, // a new client never retries a timeout; the HEAD's two retries leave 1.2
		{"retrystack, sketch 10 s", false, false, 10},     // no success yet in the last 2 s
		{"retrystack, AWS quota", true, true, 30},         // 500 tokens: 50 timeouts' retries
		{"retrystack, Alone()", true, true, 12},           // a stock of two
	} {
		t.Run(c.config, func(t *testing.T) {
			t.Parallel()
			cfg := config(t, c.config)
			first, err := LoneFirst(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if (first.OK == 1) != c.first {
				t.Errorf("lone-first: %s, want retried %v", first.Outcome, c.first)
			}
			sdk, err := LoneSDK(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if (sdk.OK == 2) != c.sdk {
				t.Errorf("lone-sdk: %s, want both 200 %v", sdk.Outcome, c.sdk)
			}
			all, err := LoneAllTimeouts(cfg, 10, 100)
			if err != nil {
				t.Fatal(err)
			}
			if all.OK != 0 || all.Requests != c.timeouts {
				t.Errorf("lone-all-timeouts: %d requests for 10 operations (%d ok), want %d", all.Requests, all.OK, c.timeouts)
			}
		})
	}
}

// The chaos cell's injected 503s never reach the server: the client's
// attempts outnumber the server's requests, and retries without a budget
// carry nearly every operation through.
func TestLoneChaos(t *testing.T) {
	res, err := LoneChaos(config(t, "retrystack, no budget"), 100, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK < 95 || res.Attempts <= res.Requests || res.Requests < 90 {
		t.Errorf("%+v", res)
	}
}
