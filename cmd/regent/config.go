package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/regent-broker/regent/telemetry"
)

// Config is the node's configuration. DefaultConfig gives the zero-config
// defaults: 127.0.0.1:9092, data under ./data.
type Config struct {
	Listen         string
	Advertise      string
	DataDir        string
	Fsync          string
	FlushInterval  time.Duration
	RetentionCheck time.Duration
	LogLevel       string
	LogFormat      string
	BrokerConfigs  string
	MaxConnections int
	IdleTimeout    time.Duration
	Pprof          string
	// TxnMaxTimeout caps transaction.timeout.ms (Kafka's
	// transaction.max.timeout.ms); above it INVALID_TRANSACTION_TIMEOUT.
	TxnMaxTimeout time.Duration

	// Telemetry, all off by default.
	OtelExporter    string  // none, otlp-grpc, otlp-http, stdout
	OtelEndpoint    string  // collector host:port or URL
	OtelSampleRatio float64 // 0..1, parent-based
	MetricsListen   string  // host:port serving Prometheus /metrics; empty: off
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:9092",
		DataDir:         "./data",
		Fsync:           "interval",
		FlushInterval:   time.Second,
		RetentionCheck:  30 * time.Second,
		LogLevel:        "info",
		LogFormat:       "text",
		MaxConnections:  10000,
		IdleTimeout:     10 * time.Minute,
		TxnMaxTimeout:   time.Hour,
		OtelExporter:    "none",
		OtelSampleRatio: 1,
	}
}

// Validate checks the config.
func (c Config) Validate() error {
	if _, _, err := splitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: %w", c.Listen, err)
	}
	if c.Advertise != "" {
		if _, _, err := splitHostPort(c.Advertise); err != nil {
			return fmt.Errorf("--advertise %q: %w", c.Advertise, err)
		}
	}
	if c.DataDir == "" {
		return fmt.Errorf("--data must not be empty")
	}
	if c.Fsync != "interval" && c.Fsync != "always" {
		return fmt.Errorf("--fsync %q: want interval or always", c.Fsync)
	}
	if c.FlushInterval <= 0 || c.RetentionCheck <= 0 {
		return fmt.Errorf("intervals must be positive")
	}
	if _, err := c.brokerOverrides(); err != nil {
		return err
	}
	if c.OtelSampleRatio < 0 || c.OtelSampleRatio > 1 {
		return fmt.Errorf("--otel-sample-ratio %v: want 0..1", c.OtelSampleRatio)
	}
	if err := c.telemetry().Validate(); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	if c.MetricsListen != "" {
		if _, _, err := splitHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("--metrics-listen %q: %w", c.MetricsListen, err)
		}
	}
	return nil
}

// telemetry maps the flags onto the telemetry config.
func (c Config) telemetry() telemetry.Config {
	ratio := c.OtelSampleRatio
	if ratio == 0 {
		ratio = -1 // telemetry's zero means "the default", all
	}
	return telemetry.Config{
		Exporter:      c.OtelExporter,
		Endpoint:      c.OtelEndpoint,
		SampleRatio:   ratio,
		MetricsListen: c.MetricsListen,
		ServiceName:   "regent",
	}
}

func splitHostPort(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("port %q: want 1-65535", port)
	}
	return host, int32(p), nil
}

func (c Config) brokerOverrides() (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(c.BrokerConfigs) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(c.BrokerConfigs, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--broker-config entry %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}
