package main

import "testing"

func TestClientTelemetryResolution(t *testing.T) {
	for _, tc := range []struct {
		c                  Config
		exporter, endpoint string
	}{
		{Config{OtelExporter: "none"}, "", ""},
		{Config{OtelExporter: "stdout"}, "", ""},
		{Config{OtelExporter: "otlp-grpc", OtelEndpoint: "127.0.0.1:4317"}, "otlp-grpc", "127.0.0.1:4317"},
		{Config{OtelExporter: "otlp-http", ClientTelemetryExporter: "none"}, "", ""},
		{Config{OtelExporter: "otlp-grpc", OtelEndpoint: "a:1", ClientTelemetryExporter: "otlp-http", ClientTelemetryEndpoint: "http://b:2"}, "otlp-http", "http://b:2"},
		{Config{ClientTelemetryExporter: "otlp-grpc", OtelEndpoint: "a:1"}, "otlp-grpc", "a:1"},
	} {
		e, ep := tc.c.clientTelemetry()
		if e != tc.exporter || ep != tc.endpoint {
			t.Errorf("%+v: got %q %q, want %q %q", tc.c, e, ep, tc.exporter, tc.endpoint)
		}
	}
}
