package hedge

import (
	"testing"
	"time"
)

// The percentile comes from recent latencies, within a bucket's width
// (25 %), and only once there are enough of them.
func TestHistogramPercentile(t *testing.T) {
	var h histogram
	for range minSamples - 1 {
		h.add(5 * time.Millisecond)
	}
	if _, ok := h.percentile(0.95); ok {
		t.Fatal("a percentile from too few samples")
	}
	for range 80 {
		h.add(5 * time.Millisecond)
	}
	for range 20 {
		h.add(300 * time.Millisecond)
	}
	if d, _ := h.percentile(0.5); d < 5*time.Millisecond || d > 7*time.Millisecond {
		t.Errorf("p50 %v, want ~5 ms", d)
	}
	if d, _ := h.percentile(0.95); d < 300*time.Millisecond || d > 375*time.Millisecond {
		t.Errorf("p95 %v, want ~300 ms", d)
	}
	// Old latencies fade: after many fast ones, the slow ones no longer
	// reach the 95th percentile.
	for range minSamples * 200 {
		h.add(5 * time.Millisecond)
	}
	if d, _ := h.percentile(0.95); d > 7*time.Millisecond {
		t.Errorf("p95 after the slow spell %v, want ~5 ms", d)
	}
}

func TestBuckets(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, time.Millisecond, 37 * time.Millisecond, time.Second, 24 * time.Hour} {
		i := bucketOf(d)
		if i < 0 || i >= buckets {
			t.Fatalf("bucket %d for %v", i, d)
		}
		if i < buckets-1 && upper(i) < d {
			t.Errorf("%v in bucket %d, whose upper bound is %v", d, i, upper(i))
		}
	}
}
