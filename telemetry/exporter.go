package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newExporter builds the span exporter cfg names. An endpoint with a
// scheme is a URL (http: plaintext, https: TLS); a bare host:port is
// plaintext.
func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	isURL := strings.Contains(cfg.Endpoint, "://")
	switch cfg.Exporter {
	case ExporterOTLPGRPC:
		var opts []otlptracegrpc.Option
		switch {
		case isURL:
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint), otlptracegrpc.WithInsecure())
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp-grpc exporter: %w", err)
		}
		return exp, nil
	case ExporterOTLPHTTP:
		var opts []otlptracehttp.Option
		switch {
		case isURL:
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint), otlptracehttp.WithInsecure())
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp-http exporter: %w", err)
		}
		return exp, nil
	case ExporterStdout:
		exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
		if err != nil {
			return nil, fmt.Errorf("stdout exporter: %w", err)
		}
		return exp, nil
	}
	return nil, fmt.Errorf("otel exporter %q: want none, otlp-grpc, otlp-http or stdout", cfg.Exporter)
}
