package main

import (
	"log/slog"
	"strconv"

	"github.com/regent-broker/regent/actors/clientmetrics"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/telemetry"
)

// clientTelemetry resolves where clients' pushed metrics go: the
// --client-telemetry-* flags, else the traces' OTLP exporter and endpoint.
// An empty exporter means off.
func (c Config) clientTelemetry() (exporter, endpoint string) {
	exporter, endpoint = c.ClientTelemetryExporter, c.ClientTelemetryEndpoint
	if exporter == "" && (c.OtelExporter == telemetry.ExporterOTLPGRPC || c.OtelExporter == telemetry.ExporterOTLPHTTP) {
		exporter = c.OtelExporter
	}
	if exporter == "none" {
		exporter = ""
	}
	if endpoint == "" {
		endpoint = c.OtelEndpoint
	}
	return exporter, endpoint
}

// serveClientMetrics installs the CLIENT_METRICS store in srv and, when
// client telemetry is exported, the instance manager and the OTLP
// forwarder. The returned func stops the forwarder.
func serveClientMetrics(cfg Config, store *clientmetrics.Store, srv *protocol.Server, tel *telemetry.Telemetry, logger *slog.Logger) (func(), error) {
	exporter, endpoint := cfg.clientTelemetry()
	if exporter == "" {
		srv.SetClientMetrics(store, nil, nil)
		return func() {}, nil
	}
	fwd, err := tel.NewClientMetricsForwarder(telemetry.ClientMetricsConfig{
		Exporter: exporter, Endpoint: endpoint, BrokerID: strconv.Itoa(int(cfg.NodeID)),
	})
	if err != nil {
		return nil, err
	}
	// The store is read through Current at each instance's computation:
	// a replicated change reaches clients at their next request.
	mgr := clientmetrics.NewManager(clientmetrics.ManagerConfig{MaxBytes: cfg.TelemetryMaxBytes}, store.Current)
	srv.SetClientMetrics(store, mgr, fwd)
	logger.Info("client telemetry on", "subscriptions", len(store.Current().Subs), "telemetry_max_bytes", mgr.MaxBytes())
	return func() {
		if err := fwd.Close(); err != nil {
			logger.Warn("client telemetry forwarder close", "err", err)
		}
	}, nil
}
