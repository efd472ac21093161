package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only with --pprof
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/actors/txn"
	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/netio"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/telemetry"
)

// run starts a single node and serves until ctx ends.
func run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "meta"), 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	clusterID, err := loadClusterID(cfg.DataDir)
	if err != nil {
		return err
	}
	overrides, _ := cfg.brokerOverrides()

	tcfg := cfg.telemetry()
	tcfg.Logger, tcfg.InstanceID = logger, "1"
	tel, err := telemetry.New(ctx, tcfg)
	if err != nil {
		return err
	}
	telStopped := false
	stopTelemetry := func() {
		if telStopped {
			return
		}
		telStopped = true
		// Flush the spans still buffered, within a bound.
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(flushCtx); err != nil {
			logger.Warn("telemetry shutdown", "err", err)
		}
	}
	defer stopTelemetry()
	if tcfg.Exporter != "none" {
		logger.Info("tracing requests", "exporter", tcfg.Exporter, "endpoint", tcfg.Endpoint, "sample_ratio", cfg.OtelSampleRatio)
	}
	broker := logconfig.Broker{Overrides: overrides}

	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logger.With("component", "actors")
	}))
	sync := partition.SyncInterval
	if cfg.Fsync == "always" {
		sync = partition.SyncAlways
	}
	start := time.Now()
	reg, err := topics.Open(topics.Options{DataDir: cfg.DataDir, Root: system.Root, Sync: sync, Repl: cluster.NewLocal(), Broker: broker, Logger: logger})
	if err != nil {
		return fmt.Errorf("open topics: %w", err)
	}
	logger.Info("recovered topics", "topics", len(reg.List()), "took", time.Since(start).Round(time.Millisecond))
	pids, err := protocol.OpenProducerIDs(cfg.DataDir)
	if err != nil {
		return err
	}
	groups, err := group.NewManager(group.Options{DataDir: cfg.DataDir, Root: system.Root, Logger: logger, Broker: broker, Fsync: cfg.Fsync == "always"})
	if err != nil {
		return fmt.Errorf("open groups: %w", err)
	}
	adv := cfg.Advertise
	if adv == "" {
		adv = cfg.Listen
	}
	host, port, _ := splitHostPort(adv)
	txns, err := txn.NewCoordinator(txn.Options{
		DataDir: cfg.DataDir, Root: system.Root, Logger: logger,
		NextProducerID: pids.Next, Offsets: groups, Fsync: cfg.Fsync == "always",
		MaxTimeout: cfg.TxnMaxTimeout,
		Partitions: func(t string, p int32) txn.TxnPartition {
			if pp := reg.Partition(t, p); pp != nil {
				return pp
			}
			return nil // not a nil *Partition: the interface would be non-nil
		},
	})
	if err != nil {
		return fmt.Errorf("open transactions: %w", err)
	}
	srv := protocol.NewServer(protocol.Config{NodeID: 1, Host: host, Port: port, ClusterID: clusterID, DataDir: cfg.DataDir, Logger: logger}, reg, pids, groups, txns)
	nsrv := netio.New(netio.Config{
		Addr: cfg.Listen, Multicore: true, Logger: logger,
		MaxConnections: cfg.MaxConnections, IdleTimeout: cfg.IdleTimeout,
		Observer: tel.Observer(),
	}, srv)
	// Consumer-group lag: at each scrape, every group's committed offsets.
	tel.SetCommittedOffsets(func(emit func(group, topic string, partition int32, offset int64)) {
		committedOffsets(groups, emit)
	})
	topicName := func(id [16]byte) string {
		if t := reg.GetByID(id); t != nil {
			return t.Name
		}
		return ""
	}
	if err := tel.ObserveBroker(telemetry.Broker{ForEachPartition: reg.ForEachPartition, Connections: nsrv.OpenConnections, TopicName: topicName}); err != nil {
		return err
	}

	if cfg.Pprof != "" {
		go func() {
			logger.Info("pprof listening", "addr", cfg.Pprof)
			if err := http.ListenAndServe(cfg.Pprof, nil); err != nil {
				logger.Warn("pprof stopped", "err", err)
			}
		}()
	}
	errc := make(chan error, 1)
	go func() { errc <- nsrv.Run() }()

	flush := time.NewTicker(cfg.FlushInterval)
	defer flush.Stop()
	maintain := time.NewTicker(cfg.RetentionCheck)
	defer maintain.Stop()
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errc:
			runErr = err
			errc = nil
			break loop
		case <-flush.C:
			if sync == partition.SyncInterval {
				reg.ForEachPartition((*partition.Partition).Sync)
				if err := groups.Sync(); err != nil {
					logger.Error("fsync group store", "err", err)
				}
				if err := txns.Sync(); err != nil {
					logger.Error("fsync transaction store", "err", err)
				}
			}
		case <-maintain.C:
			reg.ForEachPartition((*partition.Partition).Maintain)
		}
	}
	logger.Info("shutting down")
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if errc != nil {
		if err := nsrv.Stop(stopCtx); err != nil {
			logger.Warn("network stop", "err", err)
		}
		select {
		case <-errc:
		case <-stopCtx.Done():
		}
	}
	// Requests are over: flush their spans, stop serving metrics.
	stopTelemetry()
	if err := txns.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("close transactions: %w", err))
	}
	if err := groups.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("close groups: %w", err))
	}
	if err := reg.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("close topics: %w", err))
	}
	system.Shutdown()
	logger.Info("stopped")
	return runErr
}

// lockDataDir takes an exclusive lock so two brokers never share a dir.
func lockDataDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "meta", "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s is in use by another regent: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// loadClusterID reads the cluster id, making one on first start.
func loadClusterID(dir string) (string, error) {
	path := filepath.Join(dir, "meta", "cluster-id")
	raw, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(raw)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read cluster id: %w", err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	if err := topics.WriteFileAtomic(path, []byte(id)); err != nil {
		return "", fmt.Errorf("write cluster id: %w", err)
	}
	return id, nil
}

// committedOffsets reports every group's committed offsets to emit, for the
// lag metrics. It waits for the group actors (a scrape goroutine calls it),
// a bounded time per group.
func committedOffsets(groups *group.Manager, emit func(group, topic string, partition int32, offset int64)) {
	for _, g := range groups.ListGroups() {
		done := make(chan kmsg.OffsetFetchResponseGroup, 1)
		groups.FetchOffsets(g.Group, group.FetchQuery{MemberEpoch: -1}, func(r kmsg.OffsetFetchResponseGroup) { done <- r })
		select {
		case r := <-done:
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode == 0 && p.Offset >= 0 {
						emit(g.Group, t.Topic, p.Partition, p.Offset)
					}
				}
			}
		case <-time.After(2 * time.Second):
		}
	}
}
