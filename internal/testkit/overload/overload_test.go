package overload

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Close answers every caller still waiting, queued or in service: no
// goroutine outlives the service.
func TestCloseAnswersWaitingCallers(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := NewService(1, time.Hour)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			req, _ := http.NewRequest("GET", "http://service.test/", nil)
			_, err := s.RoundTrip(req)
			errs <- err
		}()
	}
	for s.Requests() < 3 {
		time.Sleep(time.Millisecond) // until the three are queued or in service
	}
	s.Close()
	for range 3 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("a caller got %v, want ErrClosed", err)
		}
	}
}

// A capacity of 0 (or NaN, or negative) is a hundredth, never a request
// served at once.
func TestZeroCapacity(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := NewService(1, 10*time.Millisecond)
	defer s.Close()
	s.SetCapacity(0)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://service.test/", nil)
	if _, err := s.RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("at capacity 0 a 10 ms request answered within 200 ms: %v", err)
	}
}

// An experiment whose last operation starts late (a loaded machine)
// counts it in its place in the schedule.
func TestLateStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := NewService(4, time.Millisecond)
	defer s.Close()
	slow := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		time.Sleep(5 * time.Millisecond) // the client's own work delays nothing but itself
		return s.RoundTrip(req)
	})
	e := Experiment{Rate: 1000, Warmup: 10 * time.Millisecond, Trigger: 10 * time.Millisecond, After: 10 * time.Millisecond, TriggerCapacity: 0.5, Grace: 50 * time.Millisecond, Bucket: 10 * time.Millisecond}
	r := e.Run(slow, s)
	if len(r.Goodput) != 3 {
		t.Errorf("%d buckets, want 3", len(r.Goodput))
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
