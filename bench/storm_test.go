package bench

import "testing"

// The storm targets, as a test: retrystack's default policy amplifies a
// failing server at most 1.25×, keeps its pool when it gives up on a 5xx
// (dials stay near the concurrency of 50; a pool thrown away on every
// give-up dials thousands of times), leaves nothing open, and sends a POST
// on 503 once. (Amplification and counts are exact; no timing is asserted.)
func TestStormTargets(t *testing.T) {
	lib := Libs[1]
	if lib.Name != "retrystack" {
		t.Fatalf("Libs[1] is %s", lib.Name)
	}
	for _, fault := range []string{"503", "500", "reset"} {
		res, err := Storm(lib, fault)
		if err != nil {
			t.Fatal(err)
		}
		pooled := fault == "reset" || res.Dials <= 200 // a reset closes its connection
		if res.Amplification > 1.25 || !pooled || res.OpenConnsAfter != 0 || res.GoroutinesAfter != 0 {
			t.Errorf("storm %s: %+v", fault, res)
		}
	}
	if n, err := PostSends(lib); err != nil || n != 1 {
		t.Errorf("POST on 503 sent %d times (%v), want 1", n, err)
	}
}
