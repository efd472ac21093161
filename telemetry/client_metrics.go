package telemetry

// Client telemetry (KIP-714): the metrics clients push with PushTelemetry
// are forwarded to an OTLP metrics endpoint as they came (resource
// metrics, scopes, data points, the client's delta temporality), each
// resource labelled with who sent it: client_id, client_instance_id,
// client_software_name/version, client_source_address/port and principal
// (KIP-714's broker-added labels), and broker_id. Forwarding the client's
// own OTLP rather than re-recording it through Regent's meter keeps its
// names, units, temporality and timestamps exact; the Prometheus endpoint
// gets counters of the pushes forwarded, refused and dropped instead of
// per-client series, whose number clients would choose.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/regent-broker/regent/protocol"
)

// ClientMetricsConfig configures the forwarding of clients' metrics.
type ClientMetricsConfig struct {
	// Exporter is otlp-grpc or otlp-http.
	Exporter string
	// Endpoint is the OTLP receiver: host:port (plaintext) or a URL
	// (https: TLS). For otlp-http a URL's path is kept, except an empty
	// path or /v1/traces, which become /v1/metrics. Empty: the standard
	// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT,
	// else localhost's default port (4317 for gRPC, 4318 for HTTP).
	Endpoint string
	// BrokerID labels every forwarded resource (broker_id).
	BrokerID string
	// MaxQueuedBytes bounds the decoded pushes waiting to be sent; a push
	// past it is dropped (counted and logged). Default 64 MiB.
	MaxQueuedBytes int64
	// Timeout bounds one export. Default 10 s.
	Timeout time.Duration
}

// Validate checks the config.
func (c ClientMetricsConfig) Validate() error {
	if c.Exporter != ExporterOTLPGRPC && c.Exporter != ExporterOTLPHTTP {
		return fmt.Errorf("client metrics exporter %q: want otlp-grpc or otlp-http", c.Exporter)
	}
	if strings.Contains(c.Endpoint, "://") {
		if _, err := url.Parse(c.Endpoint); err != nil {
			return fmt.Errorf("client metrics endpoint: %w", err)
		}
	}
	return nil
}

// ClientMetricsForwarder implements protocol.ClientTelemetrySink: pushes
// are decoded on the caller's goroutine and sent, in order, by one
// goroutine of its own.
type ClientMetricsForwarder struct {
	cfg    ClientMetricsConfig
	log    *slog.Logger
	send   func(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) error
	closer func() error

	queue  chan queued
	queued atomic.Int64 // bytes in queue
	// ctx ends at Close: the loop stops, an export in flight is cut short.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	// Counters for /metrics and tests.
	forwarded, failed, dropped, invalid atomic.Int64
	reg                                 metric.Registration // nil: no meter
	lastFailLog                         atomic.Int64        // unix nanos of the last failure logged
}

type queued struct {
	req  *colmetricspb.ExportMetricsServiceRequest
	size int64
}

// NewClientMetricsForwarder starts a forwarder. With t's metrics endpoint
// on, its counters are served there (regent_client_telemetry_pushes_total
// by outcome). Close it to stop.
func (t *Telemetry) NewClientMetricsForwarder(cfg ClientMetricsConfig) (*ClientMetricsForwarder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	if cfg.MaxQueuedBytes <= 0 {
		cfg.MaxQueuedBytes = 64 << 20
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	log := slog.Default()
	if t != nil && t.log != nil {
		log = t.log
	}
	f := &ClientMetricsForwarder{cfg: cfg, log: log, queue: make(chan queued, 1024), done: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	var err error
	switch cfg.Exporter {
	case ExporterOTLPGRPC:
		err = f.dialGRPC()
	case ExporterOTLPHTTP:
		err = f.setupHTTP()
	}
	if err != nil {
		f.cancel()
		return nil, err
	}
	if t != nil && t.mp != nil {
		if err := f.registerMetrics(t.mp.Meter(instrumentationName)); err != nil {
			f.cancel()
			_ = f.closer()
			return nil, err
		}
	}
	go f.run()
	log.Info("client telemetry forwarding on", "exporter", cfg.Exporter, "endpoint", cfg.Endpoint)
	return f, nil
}

func (f *ClientMetricsForwarder) dialGRPC() error {
	target, creds := f.cfg.Endpoint, insecure.NewCredentials()
	if target == "" {
		target = "localhost:4317"
	}
	if strings.Contains(target, "://") {
		u, _ := url.Parse(target)
		target = u.Host
		if u.Scheme == "https" {
			creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		}
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("client metrics otlp-grpc %s: %w", target, err)
	}
	client := colmetricspb.NewMetricsServiceClient(conn)
	f.send = func(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) error {
		resp, err := client.Export(ctx, req)
		if err != nil {
			return err
		}
		if ps := resp.GetPartialSuccess(); ps != nil && ps.GetRejectedDataPoints() > 0 {
			return fmt.Errorf("receiver rejected %d data points: %s", ps.GetRejectedDataPoints(), ps.GetErrorMessage())
		}
		return nil
	}
	f.closer = conn.Close
	return nil
}

func (f *ClientMetricsForwarder) setupHTTP() error {
	target := f.cfg.Endpoint
	switch {
	case target == "":
		target = "http://localhost:4318/v1/metrics"
	case !strings.Contains(target, "://"):
		target = "http://" + target + "/v1/metrics"
	default:
		u, _ := url.Parse(target)
		if u.Path == "" || u.Path == "/" || u.Path == "/v1/traces" {
			u.Path = "/v1/metrics"
		}
		target = u.String()
	}
	hc := &http.Client{Timeout: f.cfg.Timeout}
	f.send = func(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) error {
		body, err := proto.Marshal(req)
		if err != nil {
			return err
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return err
		}
		hr.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := hc.Do(hr)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s: %s: %s", target, resp.Status, msg)
		}
		return nil
	}
	f.closer = func() error { hc.CloseIdleConnections(); return nil }
	return nil
}

func (f *ClientMetricsForwarder) registerMetrics(m metric.Meter) error {
	c, err := m.Int64ObservableCounter("regent.client_telemetry.pushes",
		metric.WithDescription("Client telemetry pushes (KIP-714) by outcome: forwarded to the OTLP endpoint, failed there, dropped with the queue full, invalid (did not decode)."))
	if err != nil {
		return fmt.Errorf("client telemetry counter: %w", err)
	}
	outcomes := []struct {
		attrs metric.ObserveOption
		v     *atomic.Int64
	}{
		{metric.WithAttributes(attribute.String("outcome", "forwarded")), &f.forwarded},
		{metric.WithAttributes(attribute.String("outcome", "failed")), &f.failed},
		{metric.WithAttributes(attribute.String("outcome", "dropped")), &f.dropped},
		{metric.WithAttributes(attribute.String("outcome", "invalid")), &f.invalid},
	}
	f.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, oc := range outcomes {
			o.ObserveInt64(c, oc.v.Load(), oc.attrs)
		}
		return nil
	}, c)
	if err != nil {
		return fmt.Errorf("client telemetry counter: %w", err)
	}
	return nil
}

// ExportClientMetrics implements protocol.ClientTelemetrySink: it decodes
// data as an OTLP MetricsData, labels each resource with meta and queues
// it. It never blocks: with the queue full the push is dropped (the client
// is not told: its push was valid). It returns an error only for data
// that does not decode.
func (f *ClientMetricsForwarder) ExportClientMetrics(meta protocol.ClientTelemetryMeta, data []byte) error {
	var md metricspb.MetricsData
	if err := proto.Unmarshal(data, &md); err != nil {
		f.invalid.Add(1)
		return fmt.Errorf("decode OTLP MetricsData: %w", err)
	}
	if len(md.ResourceMetrics) == 0 {
		return nil
	}
	labels := f.labels(meta)
	for _, rm := range md.ResourceMetrics {
		if rm.Resource == nil {
			rm.Resource = &resourcepb.Resource{}
		}
		rm.Resource.Attributes = setAttrs(rm.Resource.Attributes, labels)
	}
	size := int64(len(data))
	if f.queued.Add(size) > f.cfg.MaxQueuedBytes {
		f.queued.Add(-size)
		f.dropFull(meta)
		return nil
	}
	select {
	case f.queue <- queued{req: &colmetricspb.ExportMetricsServiceRequest{ResourceMetrics: md.ResourceMetrics}, size: size}:
	default:
		f.queued.Add(-size)
		f.dropFull(meta)
	}
	return nil
}

func (f *ClientMetricsForwarder) dropFull(meta protocol.ClientTelemetryMeta) {
	if f.dropped.Add(1)%100 == 1 {
		f.log.Warn("client telemetry queue full: push dropped", "client_id", meta.ClientID,
			"client_instance_id", meta.ClientInstanceID, "dropped_total", f.dropped.Load())
	}
}

// labels are KIP-714's broker-added labels, the empty ones left out.
func (f *ClientMetricsForwarder) labels(meta protocol.ClientTelemetryMeta) [][2]string {
	var out [][2]string
	for _, kv := range [][2]string{
		{"client_instance_id", meta.ClientInstanceID},
		{"client_id", meta.ClientID},
		{"client_software_name", meta.SoftwareName},
		{"client_software_version", meta.SoftwareVersion},
		{"client_source_address", meta.SourceAddress},
		{"client_source_port", meta.SourcePort},
		{"principal", meta.Principal},
		{"broker_id", f.cfg.BrokerID},
	} {
		if kv[1] != "" {
			out = append(out, kv)
		}
	}
	return out
}

// setAttrs sets each label on attrs, replacing a same-named attribute the
// client sent (the broker's word on who sent it wins).
func setAttrs(attrs []*commonpb.KeyValue, labels [][2]string) []*commonpb.KeyValue {
	for _, l := range labels {
		v := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: l[1]}}
		found := false
		for _, a := range attrs {
			if a.GetKey() == l[0] {
				a.Value, found = v, true
			}
		}
		if !found {
			attrs = append(attrs, &commonpb.KeyValue{Key: l[0], Value: v})
		}
	}
	return attrs
}

// run sends queued pushes until Close.
func (f *ClientMetricsForwarder) run() {
	defer close(f.done)
	for {
		select {
		case <-f.ctx.Done():
			return
		case q := <-f.queue:
			f.queued.Add(-q.size)
			ctx, cancel := context.WithTimeout(f.ctx, f.cfg.Timeout)
			err := f.send(ctx, q.req)
			cancel()
			if err != nil {
				if f.ctx.Err() != nil {
					return // closing
				}
				f.failed.Add(1)
				// At most one failure logged per 30 s: a receiver that
				// is down would otherwise log every client's every push.
				now := time.Now().UnixNano()
				if last := f.lastFailLog.Load(); now-last > int64(30*time.Second) && f.lastFailLog.CompareAndSwap(last, now) {
					f.log.Warn("client telemetry forward failed", "exporter", f.cfg.Exporter, "endpoint", f.cfg.Endpoint, "err", err, "failed_total", f.failed.Load())
				}
				continue
			}
			f.forwarded.Add(1)
		}
	}
}

// ClientMetricsStats are the forwarder's counters.
type ClientMetricsStats struct{ Forwarded, Failed, Dropped, Invalid int64 }

// Stats reports the counters.
func (f *ClientMetricsForwarder) Stats() ClientMetricsStats {
	return ClientMetricsStats{f.forwarded.Load(), f.failed.Load(), f.dropped.Load(), f.invalid.Load()}
}

// Close stops the forwarder; pushes still queued are dropped (clients'
// metrics are periodic: the next push carries fresh values).
func (f *ClientMetricsForwarder) Close() error {
	var err error
	f.once.Do(func() {
		f.cancel()
		<-f.done
		if f.reg != nil {
			err = f.reg.Unregister()
		}
		err = errors.Join(err, f.closer())
	})
	return err
}
