// Command regent runs a Kafka-compatible broker.
//
//	regent --listen 127.0.0.1:9092 --data ./data
//
// Every flag has a REGENT_* environment twin (flag wins).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/regent-broker/regent/telemetry"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "cluster" {
		os.Exit(clusterCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "regent:", err)
		os.Exit(2)
	}
	logger := newLogger(cfg.LogLevel, cfg.LogFormat)
	slog.SetDefault(logger)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("regent stopped with an error", "err", err)
		os.Exit(1)
	}
}

func newLogger(level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if format == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	// Logs made with a traced context carry trace_id and span_id.
	return slog.New(telemetry.LogHandler(h))
}

// errUsage marks a bad command line.
var errUsage = errors.New("usage")

func parseConfig(args []string, getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("regent", flag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	envFloat := func(name string, def float64) float64 {
		if v := getenv(name); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
		return def
	}
	envDur := func(name string, def time.Duration) time.Duration {
		if v := getenv(name); v != "" {
			if d, err := time.ParseDuration(v); err == nil {
				return d
			}
		}
		return def
	}
	fs.StringVar(&c.Listen, "listen", env("REGENT_LISTEN", c.Listen), "host:port to listen on (REGENT_LISTEN)")
	fs.StringVar(&c.Advertise, "advertise", env("REGENT_ADVERTISE", ""), "host:port clients are told to connect to; default: the listen address (REGENT_ADVERTISE)")
	fs.StringVar(&c.DataDir, "data", env("REGENT_DATA", c.DataDir), "data directory (REGENT_DATA)")
	fs.StringVar(&c.Fsync, "fsync", env("REGENT_FSYNC", c.Fsync), "when to fsync: 'interval' (write before ack, fsync every --flush-interval) or 'always' (fsync before ack) (REGENT_FSYNC)")
	fs.DurationVar(&c.FlushInterval, "flush-interval", envDur("REGENT_FLUSH_INTERVAL", c.FlushInterval), "fsync interval for --fsync=interval (REGENT_FLUSH_INTERVAL)")
	fs.DurationVar(&c.RetentionCheck, "retention-check-interval", envDur("REGENT_RETENTION_CHECK_INTERVAL", c.RetentionCheck), "how often retention and compaction run (REGENT_RETENTION_CHECK_INTERVAL)")
	fs.StringVar(&c.LogLevel, "log-level", env("REGENT_LOG_LEVEL", c.LogLevel), "debug, info, warn or error (REGENT_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", env("REGENT_LOG_FORMAT", c.LogFormat), "text or json (REGENT_LOG_FORMAT)")
	fs.StringVar(&c.BrokerConfigs, "broker-config", env("REGENT_BROKER_CONFIG", ""), "comma-separated broker config overrides, e.g. num.partitions=3,auto.create.topics.enable=false (REGENT_BROKER_CONFIG)")
	txnMaxMs := c.TxnMaxTimeout.Milliseconds()
	if v := getenv("REGENT_TXN_MAX_TIMEOUT_MS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%w: REGENT_TXN_MAX_TIMEOUT_MS=%q: want a positive number of milliseconds", errUsage, v)
		}
		txnMaxMs = n
	}
	fs.Int64Var(&txnMaxMs, "txn-max-timeout-ms", txnMaxMs, "largest transaction.timeout.ms a producer may ask for (REGENT_TXN_MAX_TIMEOUT_MS)")
	fs.StringVar(&c.Pprof, "pprof", env("REGENT_PPROF", ""), "serve Go's pprof on this loopback host:port, for profiling (REGENT_PPROF)")
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "maximum open connections")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", envDur("REGENT_IDLE_TIMEOUT", c.IdleTimeout), "close connections idle this long (REGENT_IDLE_TIMEOUT)")
	fs.StringVar(&c.OtelExporter, "otel-exporter", env("REGENT_OTEL_EXPORTER", c.OtelExporter), "where request traces go: none, otlp-grpc, otlp-http or stdout (REGENT_OTEL_EXPORTER)")
	fs.StringVar(&c.OtelEndpoint, "otel-endpoint", env("REGENT_OTEL_ENDPOINT", ""), "OTLP collector: host:port (plaintext) or URL (https:// for TLS); default: the exporter's, or OTEL_EXPORTER_OTLP_ENDPOINT (REGENT_OTEL_ENDPOINT)")
	fs.Float64Var(&c.OtelSampleRatio, "otel-sample-ratio", envFloat("REGENT_OTEL_SAMPLE_RATIO", c.OtelSampleRatio), "share of requests traced, 0..1, parent-based (REGENT_OTEL_SAMPLE_RATIO)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", env("REGENT_METRICS_LISTEN", ""), "host:port serving Prometheus metrics at /metrics; empty: off (REGENT_METRICS_LISTEN)")
	nodeID := int64(c.NodeID)
	if v := getenv("REGENT_NODE_ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return c, fmt.Errorf("%w: REGENT_NODE_ID=%q: want a positive integer", errUsage, v)
		}
		nodeID = n
	}
	fs.Int64Var(&nodeID, "node-id", nodeID, "this node's id, unique in the cluster (REGENT_NODE_ID)")
	fs.StringVar(&c.RaftListen, "raft-listen", env("REGENT_RAFT_LISTEN", ""), "host:port of the raft transport; setting it runs the node in cluster mode (REGENT_RAFT_LISTEN)")
	fs.StringVar(&c.Peers, "peers", env("REGENT_PEERS", ""), "initial voters, id=kafka-host:port/raft-host:port/admin-host:port, comma-separated; the same on every initial node (REGENT_PEERS)")
	fs.BoolVar(&c.Join, "join", getenv("REGENT_JOIN") == "true", "a new node: wait to be added with 'regent cluster add-voter' instead of bootstrapping (REGENT_JOIN=true)")
	fs.Uint64Var(&c.RaftSnapshotThreshold, "raft-snapshot-threshold", 0, "raft entries between snapshots; 0: 8192")
	fs.DurationVar(&c.RaftSnapshotInterval, "raft-snapshot-interval", 0, "how often raft checks whether to snapshot; 0: 2m")
	fs.Uint64Var(&c.RaftTrailingLogs, "raft-trailing-logs", 0, "raft entries kept after a snapshot, for followers that fall behind; 0: 10240")
	fs.StringVar(&c.AdminListen, "admin-listen", env("REGENT_ADMIN_LISTEN", ""), "host:port of the HTTP admin endpoint (cluster status and membership) (REGENT_ADMIN_LISTEN)")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("%w: %v", errUsage, err)
	}
	if txnMaxMs <= 0 {
		return c, fmt.Errorf("%w: --txn-max-timeout-ms must be positive", errUsage)
	}
	c.TxnMaxTimeout = time.Duration(txnMaxMs) * time.Millisecond
	c.NodeID = int32(nodeID)
	return c, c.Validate()
}
