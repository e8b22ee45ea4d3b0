package bench

import (
	"testing"
)

// Small clients keep their reliability under Default's budget: 1 000
// clients, each with a few operations behind it, against a service that
// fails 1 % of requests at random, end over 99.9 % of operations in
// success (99 % without retries).
func TestSmallClientsKeepRetrying(t *testing.T) {
	lib := FleetLibs[0] // retrystack's defaults
	if lib.Name != "retrystack" {
		t.Fatalf("FleetLibs[0] is %q", lib.Name)
	}
	ok, err := SmallClients(lib, 1000, 6, 30, 0.01, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ok <= 0.999 {
		t.Errorf("%.3f %% of operations succeeded, want over 99.9 %%", ok*100)
	}
}
