package engine_test

import (
	"errors"
	"testing"

	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// Signals that net/http could not send, or two under one name, are a
// configuration error when the engine is made, not a failure of every
// request that has a deadline.
func TestBadSignals(t *testing.T) {
	for _, tc := range []struct {
		signals crosslayer.Signals
		field   string
	}{
		{crosslayer.Signals{Timeout: "Deadline Ms"}, "Signals.Timeout"},
		{crosslayer.Signals{Attempt: "X-Attempt:"}, "Signals.Attempt"},
		{crosslayer.Signals{ShouldRetry: "é"}, "Signals.ShouldRetry"},
		{crosslayer.Signals{Attempt: "x-retry", Timeout: "X-Retry"}, "Signals.Timeout"},
		{crosslayer.Signals{ShouldRetry: crosslayer.AttemptHeader}, "Signals.ShouldRetry"},
	} {
		_, err := engine.New(engine.Config{Policy: policy.Default(), Signals: tc.signals})
		var ce *policy.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: %v, want a ConfigError for %s", tc.signals, err, tc.field)
		}
	}
	// Off: the names are not used.
	if _, err := engine.New(engine.Config{Policy: policy.Default(), Signals: crosslayer.Signals{Off: true, Timeout: "bad name"}}); err != nil {
		t.Errorf("Off with a bad name: %v", err)
	}
}
