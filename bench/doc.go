// Package bench measures retrystack beside bare net/http and its peers —
// hashicorp/go-retryablehttp, failsafe-go, avast/retry-go and otelhttp — on
// the success path, the retry path and a retry storm, against an
// in-process faultserver. It is a module of its own, so the peers never
// enter the library's go.mod.
//
// Run the benchmarks interleaved and compare with benchstat:
//
//	go test -run XXX -bench . -count 10 | tee new.txt; benchstat new.txt
//
// or print every figure at once with `go run ./cmd/compare` (-json for
// one object per measurement). The lone-client cells (lone.go: one client
// against a real server on 127.0.0.1, with stalls, 503s and chaos) and
// the fleet experiment (metastable.go) run only when named (-run lone,
// -run fleet), each with retrystack under every retry budget of the
// frontier (Rules; rules.go has those the library does not ship) beside
// the peers.
package bench
