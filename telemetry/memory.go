package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Memory metric names; Prometheus shows them as
// regent_memory_budget_used_bytes{budget=...},
// regent_memory_budget_capacity_bytes{budget=...} and
// regent_connections_closed_total{reason=...} and
// regent_connections_handed_off_total.
const (
	metricBudgetUsed     = "regent.memory.budget.used"
	metricBudgetCapacity = "regent.memory.budget.capacity"
	metricConnsClosed    = "regent.connections.closed"
	metricConnsHandedOff = "regent.connections.handed_off"
)

// MemoryBudget is one memory budget's use (request, response, fetch).
type MemoryBudget struct {
	Name           string
	Used, Capacity int64
}

// ConnectionsClosed is how many connections the broker closed for one limit.
type ConnectionsClosed struct {
	Reason string
	Count  int64
}

// Memory reports the budgets and the close counters. It is called at each
// scrape, on the scraping goroutine, so it must be safe concurrently with
// the broker and must not block (netio.Server.MemoryStats, adapted).
type Memory func() ([]MemoryBudget, []ConnectionsClosed)

// ObserveMemory registers the memory-budget gauges and the
// connections-closed counter, read from m at each scrape. Call it once. A
// no-op with telemetry or metrics off.
func (t *Telemetry) ObserveMemory(m Memory) error {
	if t == nil || t.obs == nil || t.obs.m == nil || m == nil {
		return nil
	}
	meter := t.obs.m.meter
	used, err := meter.Int64ObservableGauge(metricBudgetUsed, metric.WithUnit("By"), metric.WithDescription("Bytes held against each memory budget (request, response, fetch)."))
	if err != nil {
		return err
	}
	capacity, err := meter.Int64ObservableGauge(metricBudgetCapacity, metric.WithUnit("By"), metric.WithDescription("Each memory budget's size, from --max-memory."))
	if err != nil {
		return err
	}
	closed, err := meter.Int64ObservableCounter(metricConnsClosed, metric.WithUnit("{connection}"), metric.WithDescription("Connections the broker closed, by the limit they passed."))
	if err != nil {
		return err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		budgets, closes := m()
		for _, b := range budgets {
			attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("budget", b.Name)))
			o.ObserveInt64(used, b.Used, attrs)
			o.ObserveInt64(capacity, b.Capacity, attrs)
		}
		for _, c := range closes {
			o.ObserveInt64(closed, c.Count, metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", c.Reason))))
		}
		return nil
	}, used, capacity, closed)
	if err != nil {
		return fmt.Errorf("register memory gauges: %w", err)
	}
	t.regs = append(t.regs, reg)
	return nil
}

// ObserveHandoffs registers the counter of plaintext connections moved off
// the network event loop because they kept sending while told to wait
// (their reads then wait: TCP pushes back), read from n at each scrape.
// Call it once. A no-op with telemetry or metrics off.
func (t *Telemetry) ObserveHandoffs(n func() int64) error {
	if t == nil || t.obs == nil || t.obs.m == nil || n == nil {
		return nil
	}
	handed, err := t.obs.m.meter.Int64ObservableCounter(metricConnsHandedOff, metric.WithUnit("{connection}"),
		metric.WithDescription("Plaintext connections moved off the event loop because they kept sending while told to wait."))
	if err != nil {
		return err
	}
	reg, err := t.obs.m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(handed, n())
		return nil
	}, handed)
	if err != nil {
		return fmt.Errorf("register handoff counter: %w", err)
	}
	t.regs = append(t.regs, reg)
	return nil
}
