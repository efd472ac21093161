package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/regent-broker/regent/protocol"
)

// metricACLDenials counts authorization denials (regent_acl_denials_total
// on /metrics), by operation and resource type.
const metricACLDenials = "regent.acl.denials"

// denialObserver implements protocol.DenialObserver.
type denialObserver struct {
	denials metric.Int64Counter // nil: no metrics endpoint
}

// DenialObserver is the hook for ACL denials: a counter when metrics are
// served, and attributes on the request's span when it is traced. nil
// when telemetry is off.
func (t *Telemetry) DenialObserver() protocol.DenialObserver {
	if t == nil || (t.mp == nil && t.tp == nil) {
		return nil
	}
	o := &denialObserver{}
	if t.mp != nil {
		c, err := t.mp.Meter(instrumentationName).Int64Counter(metricACLDenials, metric.WithUnit("{denial}"),
			metric.WithDescription("Requests (or parts of requests) the authorizer refused, by operation and resource type."))
		if err != nil {
			t.log.Warn("acl denial counter", "err", err)
		} else {
			o.denials = c
		}
	}
	return o
}

// ACLDenied implements protocol.DenialObserver.
func (o *denialObserver) ACLDenied(ctx context.Context, operation, resourceType string) {
	attrs := []attribute.KeyValue{attribute.String("operation", operation), attribute.String("resource_type", resourceType)}
	if o.denials != nil {
		o.denials.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("regent.acl.denied_operation", operation), attribute.String("regent.acl.denied_resource_type", resourceType))
	}
}
