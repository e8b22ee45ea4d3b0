package bench

import (
	"fmt"
	"testing"
)

func BenchmarkGET(b *testing.B) {
	srv := Server(b)
	for _, lib := range Libs {
		b.Run(lib.Name, func(b *testing.B) { GET(b, srv, lib, false) })
	}
}

func BenchmarkGETParallel(b *testing.B) {
	srv := Server(b)
	for _, lib := range Libs {
		b.Run(lib.Name, func(b *testing.B) { GET(b, srv, lib, true) })
	}
}

func BenchmarkPOST(b *testing.B) {
	srv := Server(b)
	for _, lib := range Libs {
		b.Run(lib.Name, func(b *testing.B) { POST(b, srv, lib, false) })
	}
}

func BenchmarkOverhead(b *testing.B) {
	for _, lib := range Libs {
		b.Run(lib.Name, func(b *testing.B) { Overhead(b, lib) })
	}
}

func BenchmarkRetry(b *testing.B) {
	srv := Server(b)
	for _, lib := range Libs {
		if lib.Guarded {
			continue // two failures in three trip it: not the path measured
		}
		b.Run(lib.Name, func(b *testing.B) { Retry(b, srv, lib) })
	}
}

func BenchmarkDecision(b *testing.B)        { Decision(b) }
func BenchmarkDecisionOnReset(b *testing.B) { DecisionOnReset(b) }
func BenchmarkBudgetParallel(b *testing.B)  { Budget(b) }

func BenchmarkPutStream(b *testing.B) {
	srv := Server(b)
	for _, size := range []int{100 << 10, 300 << 10} {
		for _, lib := range Libs {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, lib.Name), func(b *testing.B) { PutStream(b, srv, lib, size) })
		}
	}
}
