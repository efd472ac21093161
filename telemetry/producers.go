package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Producer-state metric names; Prometheus shows them as
// regent_producer_states and regent_producer_states_limit.
const (
	metricProducerStates      = "regent.producer.states"
	metricProducerStatesLimit = "regent.producer.states.limit"
)

// ProducerStates reports the producers every partition of the node keeps
// idempotence state for, and the bound on them (--max-producer-states).
// Called at each scrape; must be safe concurrently and not block.
type ProducerStates func() (held, limit int64)

// ObserveProducerStates registers the producer-state gauges, read from p
// at each scrape. Call it once. A no-op with telemetry or metrics off.
func (t *Telemetry) ObserveProducerStates(p ProducerStates) error {
	if t == nil || t.obs == nil || t.obs.m == nil || p == nil {
		return nil
	}
	meter := t.obs.m.meter
	held, err := meter.Int64ObservableGauge(metricProducerStates, metric.WithUnit("{producer}"), metric.WithDescription("Producers whose idempotence state the node's partitions hold (a producer counts once per partition)."))
	if err != nil {
		return err
	}
	limit, err := meter.Int64ObservableGauge(metricProducerStatesLimit, metric.WithUnit("{producer}"), metric.WithDescription("The bound on them, --max-producer-states: over it, partitions drop their least recently active producers."))
	if err != nil {
		return err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		h, l := p()
		o.ObserveInt64(held, h)
		o.ObserveInt64(limit, l)
		return nil
	}, held, limit)
	if err != nil {
		return fmt.Errorf("register producer-state gauges: %w", err)
	}
	t.regs = append(t.regs, reg)
	return nil
}
