package telemetry

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/regent-broker/regent/actors/partition"
)

// Metric names (Prometheus adds unit suffixes and _total:
// regent_requests_total, regent_request_duration_seconds, ...).
const (
	metricRequests        = "regent.requests"
	metricRequestDuration = "regent.request.duration"
	metricReceived        = "regent.network.received"
	metricSent            = "regent.network.sent"
	metricLogSize         = "regent.partition.log.size"
	metricHighWatermark   = "regent.partition.high_watermark"
	metricLogEnd          = "regent.partition.log_end_offset"
	metricLogStart        = "regent.partition.log_start_offset"
	metricLastStable      = "regent.partition.last_stable_offset"
	metricConnections     = "regent.connections"
	metricGroupLag        = "regent.group.lag"
	metricGroupCommitted  = "regent.group.committed_offset"
	metricBytesIn         = "regent.partition.produced"
	metricRecordsIn       = "regent.partition.produced.records"
	metricBytesOut        = "regent.partition.fetched"
)

// durationBuckets are request latency bounds in seconds, 50µs to 30s.
var durationBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// metrics are the per-request instruments. The counters are atomics per
// API key that observable counters report at each scrape (nanoseconds on
// the request path, against a few hundred for a synchronous instrument);
// the latency histogram is a synchronous instrument.
type metrics struct {
	meter    metric.Meter
	duration metric.Float64Histogram
	reg      metric.Registration
	// byKey is per API key; the last entry is for unknown keys.
	byKey [kmsg.MaxKey + 2]apiMetrics
}

// apiMetrics are one API's counters and measurement options.
type apiMetrics struct {
	requests, received, sent atomic.Int64
	// attrs names the API; record is it as a ready option slice, so that a
	// measurement allocates nothing (a variadic list would escape).
	attrs  metric.MeasurementOption
	record []metric.RecordOption
}

func newMetrics(m metric.Meter) (*metrics, error) {
	ms := &metrics{meter: m}
	var err error
	if ms.duration, err = m.Float64Histogram(metricRequestDuration, metric.WithUnit("s"),
		metric.WithDescription("Time from a request's first byte read to its response written, by API."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	requests, err := m.Int64ObservableCounter(metricRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests answered, by API."))
	if err != nil {
		return nil, err
	}
	received, err := m.Int64ObservableCounter(metricReceived, metric.WithUnit("By"),
		metric.WithDescription("Request bytes read from clients, length prefixes included, by API."))
	if err != nil {
		return nil, err
	}
	sent, err := m.Int64ObservableCounter(metricSent, metric.WithUnit("By"),
		metric.WithDescription("Response bytes handed to clients' connections, by API."))
	if err != nil {
		return nil, err
	}
	for k := range ms.byKey {
		name := "unknown"
		if k <= kmsg.MaxKey {
			if n := kmsg.NameForKey(int16(k)); n != "" && n != "Unknown" {
				name = n
			}
		}
		a := &ms.byKey[k]
		a.attrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("api", name)))
		a.record = []metric.RecordOption{a.attrs}
	}
	ms.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for k := range ms.byKey {
			a := &ms.byKey[k]
			if n := a.received.Load(); n > 0 {
				o.ObserveInt64(received, n, a.attrs)
				o.ObserveInt64(requests, a.requests.Load(), a.attrs)
				o.ObserveInt64(sent, a.sent.Load(), a.attrs)
			}
		}
		return nil
	}, requests, received, sent)
	if err != nil {
		return nil, fmt.Errorf("register request counters: %w", err)
	}
	return ms, nil
}

// api is key's metrics.
func (m *metrics) api(key int16) *apiMetrics {
	if key < 0 || int(key) > kmsg.MaxKey {
		return &m.byKey[len(m.byKey)-1]
	}
	return &m.byKey[key]
}

// Broker is what the broker-wide gauges read.
type Broker struct {
	// ForEachPartition calls fn for every partition
	// (topics.Registry.ForEachPartition).
	ForEachPartition func(fn func(*partition.Partition))
	// Connections is the number of open client connections
	// (netio.Server.OpenConnections); nil: not reported.
	Connections func() int64
	// TopicName resolves a topic id (requests from Produce v13 and Fetch
	// v13 name topics by id) for span names and attributes; nil or "":
	// unknown.
	TopicName func(id [16]byte) string
}

// CommittedOffsets lists every committed consumer-group offset by calling
// emit once for each. It is called at each metrics scrape, on the scraping
// goroutine: it must be safe to call concurrently with the coordinator and
// must not block for long. From it the meter reports
// regent.group.committed_offset and regent.group.lag (the partition's high
// watermark minus the committed offset, at least 0).
type CommittedOffsets func(emit func(group, topic string, partition int32, offset int64))

// lagHook holds the committed-offsets source, set once the group
// coordinator can provide it.
type lagHook struct {
	fn atomic.Pointer[CommittedOffsets]
}

// SetCommittedOffsets installs (nil: removes) the consumer-group offsets
// source behind the lag gauges. Safe at any time, from any goroutine.
func (t *Telemetry) SetCommittedOffsets(fn CommittedOffsets) {
	if fn == nil {
		t.lagHook.fn.Store(nil)
		return
	}
	t.lagHook.fn.Store(&fn)
}

// ObserveBroker registers the broker-wide gauges (partition sizes and
// offsets, connections, consumer-group lag) read from b at each scrape,
// and b's topic-id resolver for spans. Call it once, before requests are
// served. A no-op with telemetry off.
func (t *Telemetry) ObserveBroker(b Broker) error {
	if t == nil || t.obs == nil {
		return nil
	}
	if b.TopicName != nil {
		t.obs.topicName.Store(&b.TopicName)
	}
	if t.obs.m == nil {
		return nil
	}
	m := t.obs.m.meter
	size, err := m.Int64ObservableGauge(metricLogSize, metric.WithUnit("By"), metric.WithDescription("Bytes of the partition's log segments."))
	if err != nil {
		return err
	}
	hw, err := m.Int64ObservableGauge(metricHighWatermark, metric.WithUnit("{offset}"), metric.WithDescription("The partition's high watermark: the offset up to which consumers may read."))
	if err != nil {
		return err
	}
	end, err := m.Int64ObservableGauge(metricLogEnd, metric.WithUnit("{offset}"), metric.WithDescription("The offset the partition's next record will get."))
	if err != nil {
		return err
	}
	start, err := m.Int64ObservableGauge(metricLogStart, metric.WithUnit("{offset}"), metric.WithDescription("The first offset still in the partition's log."))
	if err != nil {
		return err
	}
	lso, err := m.Int64ObservableGauge(metricLastStable, metric.WithUnit("{offset}"), metric.WithDescription("The partition's last stable offset (read_committed's limit)."))
	if err != nil {
		return err
	}
	conns, err := m.Int64ObservableGauge(metricConnections, metric.WithUnit("{connection}"), metric.WithDescription("Open client connections."))
	if err != nil {
		return err
	}
	lag, err := m.Int64ObservableGauge(metricGroupLag, metric.WithUnit("{record}"), metric.WithDescription("Consumer-group lag: high watermark minus committed offset."))
	if err != nil {
		return err
	}
	committed, err := m.Int64ObservableGauge(metricGroupCommitted, metric.WithUnit("{offset}"), metric.WithDescription("Consumer-group committed offset."))
	if err != nil {
		return err
	}
	// Kafka's per-topic BytesInPerSec, MessagesInPerSec and
	// BytesOutPerSec, per partition: rate() of these, summed by topic.
	bytesIn, err := m.Int64ObservableCounter(metricBytesIn, metric.WithUnit("By"), metric.WithDescription("Record batch bytes clients produced to the partition through this node (accepted appends)."))
	if err != nil {
		return err
	}
	recordsIn, err := m.Int64ObservableCounter(metricRecordsIn, metric.WithUnit("{record}"), metric.WithDescription("Records clients produced to the partition through this node (accepted appends)."))
	if err != nil {
		return err
	}
	bytesOut, err := m.Int64ObservableCounter(metricBytesOut, metric.WithUnit("By"), metric.WithDescription("Record batch bytes this node put in fetch responses from the partition."))
	if err != nil {
		return err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		type tp struct {
			topic string
			part  int32
		}
		var hws map[tp]int64
		lagFn := t.lagHook.fn.Load()
		if lagFn != nil {
			hws = map[tp]int64{}
		}
		if b.ForEachPartition != nil {
			b.ForEachPartition(func(p *partition.Partition) {
				attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", p.Topic), attribute.Int("partition", int(p.Index))))
				h := p.HighWatermark()
				o.ObserveInt64(size, p.Log().Size(), attrs)
				o.ObserveInt64(hw, h, attrs)
				o.ObserveInt64(end, p.Log().NextOffset(), attrs)
				o.ObserveInt64(start, p.LogStartOffset(), attrs)
				o.ObserveInt64(lso, p.LastStableOffset(), attrs)
				in, recs, out := p.Traffic()
				o.ObserveInt64(bytesIn, in, attrs)
				o.ObserveInt64(recordsIn, recs, attrs)
				o.ObserveInt64(bytesOut, out, attrs)
				if hws != nil {
					hws[tp{p.Topic, p.Index}] = h
				}
			})
		}
		if b.Connections != nil {
			o.ObserveInt64(conns, b.Connections())
		}
		if lagFn != nil {
			(*lagFn)(func(group, topic string, part int32, offset int64) {
				attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("group", group), attribute.String("topic", topic), attribute.Int("partition", int(part))))
				o.ObserveInt64(committed, offset, attrs)
				if h, ok := hws[tp{topic, part}]; ok && offset >= 0 {
					o.ObserveInt64(lag, max(0, h-offset), attrs)
				}
			})
		}
		return nil
	}, size, hw, end, start, lso, bytesIn, recordsIn, bytesOut, conns, lag, committed)
	if err != nil {
		return fmt.Errorf("register broker gauges: %w", err)
	}
	t.regs = append(t.regs, reg)
	return nil
}
