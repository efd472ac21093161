package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/regent-broker/regent/actors/quotas"
)

// Client quota metric names; Prometheus shows them as
// regent_quota_rate{quota=...,user=...,client_id=...,ip=...} (the measured rate,
// bytes per second for the byte rates, percent of a thread for
// request_percentage, partitions per second for controller_mutation_rate)
// and
// regent_quota_throttle_time_milliseconds_total{...}, per quota sensor
// (Kafka's per-entity byte-rate and throttle-time metrics). Sensors idle
// for an hour drop out, as Kafka's do.
const (
	metricQuotaRate     = "regent.quota.rate"
	metricQuotaThrottle = "regent.quota.throttle.time"
)

// ObserveQuotas registers the client quota metrics, read from e at each
// scrape. Call it once. A no-op with telemetry or metrics off.
func (t *Telemetry) ObserveQuotas(e *quotas.Enforcer) error {
	if t == nil || t.obs == nil || t.obs.m == nil || e == nil {
		return nil
	}
	meter := t.obs.m.meter
	rate, err := meter.Float64ObservableGauge(metricQuotaRate, metric.WithDescription("A client quota sensor's measured rate (bytes per second for producer_byte_rate and consumer_byte_rate, percent of one thread for request_percentage, partitions per second for controller_mutation_rate, connections per second for connection_creation_rate), over Kafka's quota windows."))
	if err != nil {
		return err
	}
	throttle, err := meter.Int64ObservableCounter(metricQuotaThrottle, metric.WithUnit("ms"), metric.WithDescription("Throttle time given to clients by a client quota sensor."))
	if err != nil {
		return err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, s := range e.Stats(time.Now()) {
			attrs := metric.WithAttributeSet(attribute.NewSet(
				attribute.String("quota", s.Sensor.Key), attribute.String("user", s.Sensor.User), attribute.String("client_id", s.Sensor.Client), attribute.String("ip", s.Sensor.IP)))
			o.ObserveFloat64(rate, s.Rate, attrs)
			o.ObserveInt64(throttle, s.ThrottleMs, attrs)
		}
		return nil
	}, rate, throttle)
	if err != nil {
		return fmt.Errorf("register quota metrics: %w", err)
	}
	t.regs = append(t.regs, reg)
	return nil
}
