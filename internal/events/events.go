// Package events builds the attributes of the events the library's own
// layers emit (their names are in internal/protocol): one list for the
// retry layer, which emits them, and for telemetry's hooks of engine.Do,
// which records them. A package of its own so that protocol, which the
// server halves import, depends on nothing.
package events

import (
	"time"

	"github.com/retrystack/retrystack/internal/protocol"
	"go.opentelemetry.io/otel/attribute"
)

// RetryAttrs are the attributes of protocol.EventRetry: the one list the retry
// layer emits and telemetry's hooks for engine.Do record.
func RetryAttrs(wait time.Duration, fromHint bool, layer, cause string) []attribute.KeyValue {
	source := "policy"
	if fromHint {
		source = "retry-after"
	}
	return []attribute.KeyValue{
		attribute.Float64(protocol.AttrDelay, wait.Seconds()), attribute.String(protocol.AttrDelaySource, source),
		attribute.String(protocol.AttrLayer, layer), attribute.String(protocol.AttrReason, cause),
	}
}

// PitfallAttrs are the attributes of protocol.EventPitfall: the cookies' names,
// never their values.
func PitfallAttrs(pitfall string, cookies []string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(protocol.AttrPitfall, pitfall)}
	if len(cookies) > 0 {
		attrs = append(attrs, attribute.StringSlice(protocol.AttrCookies, cookies))
	}
	return attrs
}

// PacingAttrs are the attributes of protocol.EventPacing: the server
// (wire.ServerAddress), what the operation did ("waited" or "stopped")
// and for how long the host asked it to wait.
func PacingAttrs(host string, port int, outcome string, wait time.Duration) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(protocol.AttrServerAddress, host), attribute.Int(protocol.AttrServerPort, port),
		attribute.String(protocol.AttrPacingOutcome, outcome), attribute.Float64(protocol.AttrDelay, wait.Seconds()),
	}
}
