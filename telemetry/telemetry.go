// Package telemetry is the OpenTelemetry adapter: it implements the core's
// hooks (protocol.Observer, partition.Tracer) with spans and metrics, sets
// up the tracer and meter providers and their exporters, serves Prometheus
// metrics, and wraps slog handlers so logs made with a traced context carry
// trace and span ids. Nothing outside this package and cmd/ imports
// OpenTelemetry.
//
// Everything is off by default: with no exporter and no metrics listener,
// Telemetry.Observer returns nil and the core skips every hook.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/regent-broker/regent/protocol"
)

// Exporter names accepted by Config.Exporter.
const (
	ExporterNone     = "none"
	ExporterOTLPGRPC = "otlp-grpc"
	ExporterOTLPHTTP = "otlp-http"
	ExporterStdout   = "stdout"
)

// instrumentationName names the tracer and meter.
const instrumentationName = "github.com/regent-broker/regent"

// Config configures telemetry. The zero value turns everything off.
type Config struct {
	// Exporter is where spans go: "" or "none" (no tracing), "otlp-grpc",
	// "otlp-http" or "stdout".
	Exporter string
	// Endpoint is the OTLP collector: host:port (plaintext) or a URL
	// (http:// plaintext, https:// TLS; for otlp-http the URL's path is the
	// traces path). Empty: the exporter's default, or the standard
	// OTEL_EXPORTER_OTLP_* environment.
	Endpoint string
	// SampleRatio is the share of requests traced, 0..1. Each request is
	// drawn when it is decoded, before any span exists, so an unsampled
	// request costs one random draw; every span under a sampled request is
	// sampled (parent-based). Zero means 1 (trace everything); a negative
	// value samples none.
	SampleRatio float64
	// MetricsListen is the host:port serving Prometheus /metrics; empty: no
	// metrics.
	MetricsListen string

	ServiceName    string // default "regent"
	ServiceVersion string
	InstanceID     string // service.instance.id, e.g. the node id
	Logger         *slog.Logger
}

// Validate checks the config.
func (c Config) Validate() error {
	switch c.Exporter {
	case "", ExporterNone, ExporterOTLPGRPC, ExporterOTLPHTTP, ExporterStdout:
	default:
		return fmt.Errorf("otel exporter %q: want none, otlp-grpc, otlp-http or stdout", c.Exporter)
	}
	if c.SampleRatio > 1 {
		return fmt.Errorf("otel sample ratio %v: want 0..1", c.SampleRatio)
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("metrics listen %q: %w", c.MetricsListen, err)
		}
	}
	return nil
}

func (c Config) tracing() bool { return c.Exporter != "" && c.Exporter != ExporterNone }

// Telemetry holds the providers, the metrics endpoint and the observer.
type Telemetry struct {
	cfg     Config
	log     *slog.Logger
	tp      *sdktrace.TracerProvider // nil: no tracing
	mp      *sdkmetric.MeterProvider // nil: no metrics
	srv     *http.Server             // nil: no metrics endpoint
	addr    net.Addr                 // where the metrics endpoint listens
	obs     *observer                // nil: nothing observed
	regs    []metric.Registration    // gauge callbacks, unregistered on Shutdown
	lagHook *lagHook                 // consumer-group lag source
}

// New sets up telemetry as cfg says and starts the metrics endpoint. With
// tracing on it installs the tracer provider and the W3C propagator
// (tracecontext + baggage) as OpenTelemetry's globals. On error nothing is
// left running.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "regent"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := &Telemetry{cfg: cfg, log: cfg.Logger, lagHook: &lagHook{}}
	if !cfg.tracing() && cfg.MetricsListen == "" {
		return t, nil
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var tracer trace.Tracer
	if cfg.tracing() {
		exp, err := newExporter(ctx, cfg)
		if err != nil {
			return nil, err
		}
		t.tp = sdktrace.NewTracerProvider(
			sdktrace.WithBatcher(exp),
			sdktrace.WithResource(res),
			// The observer samples requests; a span under a sampled
			// one is sampled (parent-based).
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		)
		otel.SetTracerProvider(t.tp)
		otel.SetTextMapPropagator(Propagator())
		tracer = t.tp.Tracer(instrumentationName, trace.WithSchemaURL(semconv.SchemaURL))
	}
	var m *metrics
	if cfg.MetricsListen != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			t.shutdownProviders(ctx)
			return nil, fmt.Errorf("prometheus exporter: %w", err)
		}
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
		m, err = newMetrics(t.mp.Meter(instrumentationName, metric.WithSchemaURL(semconv.SchemaURL)))
		if err != nil {
			t.shutdownProviders(ctx)
			return nil, err
		}
		t.regs = append(t.regs, m.reg)
		if err := t.serveMetrics(reg); err != nil {
			t.shutdownProviders(ctx)
			return nil, err
		}
	}
	t.obs = newObserver(tracer, m, sampleRatio(cfg.SampleRatio))
	return t, nil
}

// Propagator is the text-map propagator Regent uses: W3C trace context and
// baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// sampleRatio maps Config.SampleRatio onto the share of requests traced:
// zero means all, a negative value none.
func sampleRatio(r float64) float64 {
	switch {
	case r == 0 || r >= 1:
		return 1
	case r < 0:
		return 0
	}
	return r
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := []resource.Option{
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(cfg.ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME
	}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.ServiceVersion)))
	}
	if cfg.InstanceID != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceInstanceID(cfg.InstanceID)))
	}
	res, err := resource.New(ctx, attrs...)
	if err != nil && res == nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	return res, nil
}

// serveMetrics listens on MetricsListen and serves /metrics from reg.
func (t *Telemetry) serveMetrics(reg *prometheus.Registry) error {
	ln, err := net.Listen("tcp", t.cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("metrics listen %s: %w", t.cfg.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPromLogger{t.log}}))
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	t.addr = ln.Addr()
	t.log.Info("metrics listening", "addr", ln.Addr().String(), "path", "/metrics")
	go func() {
		if err := t.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.log.Warn("metrics endpoint stopped", "err", err)
		}
	}()
	return nil
}

// MetricsAddr is the address the metrics endpoint listens on (nil: none).
func (t *Telemetry) MetricsAddr() net.Addr { return t.addr }

// Observer is the hook for netio.Config.Observer: nil when telemetry is
// off, so the core does no work for it.
func (t *Telemetry) Observer() protocol.Observer {
	if t == nil || t.obs == nil {
		return nil
	}
	return t.obs
}

// Shutdown stops the metrics endpoint, flushes spans still buffered and
// stops the providers; ctx bounds the flush.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.srv != nil {
		errs = append(errs, t.srv.Shutdown(ctx))
	}
	for _, r := range t.regs {
		errs = append(errs, r.Unregister())
	}
	errs = append(errs, t.shutdownProviders(ctx))
	return errors.Join(errs...)
}

func (t *Telemetry) shutdownProviders(ctx context.Context) error {
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// slogPromLogger routes promhttp's errors to slog.
type slogPromLogger struct{ log *slog.Logger }

func (l slogPromLogger) Println(v ...any) { l.log.Warn("metrics endpoint", "err", fmt.Sprint(v...)) }
