package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Disk reserve metric names; Prometheus shows them as
// regent_disk_reserve_bytes and regent_disk_appends_held.
const (
	metricDiskReserve = "regent.disk.reserve"
	metricAppendsHeld = "regent.disk.appends.held"
)

// DiskReserve reports the bytes the disk reserve holds back now (0 once a
// full disk used it, until it is made again) and whether appends are
// refused meanwhile. Called at each scrape; must be safe concurrently and
// not block.
type DiskReserve func() (heldBytes int64, appendsHeld bool)

// ObserveDiskReserve registers the disk-reserve gauges, read from f at
// each scrape. Call it once. A no-op with telemetry or metrics off, or f
// nil (--disk-reserve 0).
func (t *Telemetry) ObserveDiskReserve(f DiskReserve) error {
	if f == nil || t == nil || t.obs == nil || t.obs.m == nil {
		return nil
	}
	meter := t.obs.m.meter
	reserve, err := meter.Int64ObservableGauge(metricDiskReserve, metric.WithUnit("By"),
		metric.WithDescription("Disk space held back for the writes that free space on a full disk (--disk-reserve); 0 once used, until there is room to make it again."))
	if err != nil {
		return err
	}
	held, err := meter.Int64ObservableGauge(metricAppendsHeld,
		metric.WithDescription("1 while appends are refused because a full disk used the reserve and it is not made again yet (single node)."))
	if err != nil {
		return err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		b, h := f()
		o.ObserveInt64(reserve, b)
		v := int64(0)
		if h {
			v = 1
		}
		o.ObserveInt64(held, v)
		return nil
	}, reserve, held)
	if err != nil {
		return fmt.Errorf("register disk reserve gauges: %w", err)
	}
	t.regs = append(t.regs, reg)
	return nil
}
