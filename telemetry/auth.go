package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/regent-broker/regent/protocol"
)

// metricAuthFailures counts refused SASL authentications
// (regent_auth_failures_total on /metrics), by mechanism and reason.
const metricAuthFailures = "regent.auth.failures"

// authObserver implements protocol.AuthObserver.
type authObserver struct {
	failures metric.Int64Counter // nil: no metrics endpoint
}

// AuthObserver is the hook for SASL failures: a counter when metrics are
// served, and a span event on the request's span when it is traced. nil
// when telemetry is off.
func (t *Telemetry) AuthObserver() protocol.AuthObserver {
	if t == nil || (t.mp == nil && t.tp == nil) {
		return nil
	}
	o := &authObserver{}
	if t.mp != nil {
		c, err := t.mp.Meter(instrumentationName).Int64Counter(metricAuthFailures, metric.WithUnit("{failure}"),
			metric.WithDescription("SASL authentications refused, by mechanism and reason."))
		if err != nil {
			t.log.Warn("auth failure counter", "err", err)
		} else {
			o.failures = c
		}
	}
	return o
}

// AuthFailed implements protocol.AuthObserver.
func (o *authObserver) AuthFailed(ctx context.Context, mechanism, reason string) {
	attrs := []attribute.KeyValue{attribute.String("mechanism", mechanism), attribute.String("reason", reason)}
	if o.failures != nil {
		o.failures.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("regent.auth.failure", reason), attribute.String("regent.auth.mechanism", mechanism))
	}
}
