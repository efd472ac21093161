package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only with --pprof
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/clientmetrics"
	"github.com/regent-broker/regent/actors/features"
	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/groupconfig"
	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/quotas"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/actors/txn"
	"github.com/regent-broker/regent/actors/users"
	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/netio"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/telemetry"
)

// run starts a node (single, or a cluster member) and serves until ctx
// ends.
func run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "meta"), 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	var reserve *storage.Reserve
	if cfg.DiskReserve > 0 {
		// A cluster node does not hold appends after using it: a refused
		// append would stop the node (fsm.stopApplying), while a single
		// node answers it KAFKA_STORAGE_ERROR and goes on.
		reserve = storage.OpenReserve(filepath.Join(cfg.DataDir, "meta", "disk-reserve"), cfg.DiskReserve, !cfg.Clustered(), logger)
	} else {
		_ = os.Remove(filepath.Join(cfg.DataDir, "meta", "disk-reserve"))
	}
	storage.SetReserve(reserve)
	defer storage.SetReserve(nil)
	overrides, _ := cfg.brokerOverrides()
	if cfg.MaxOpenFiles > 0 {
		storage.SetMaxOpenFiles(cfg.MaxOpenFiles)
	}
	logger.Info("segment file cache", "max_open_files", storage.DefaultFileCache().Max())

	tcfg := cfg.telemetry()
	tcfg.Logger, tcfg.InstanceID = logger, strconv.Itoa(int(cfg.NodeID))
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
	// In cluster mode the raft log, fsynced on a majority before an
	// answer, is the durable copy: the state directory is not fsynced on
	// appends. It persists across restarts, made equal at start to the
	// latest raft snapshot (whose files are fsynced when it is taken) and
	// brought forward by the log entries after it.
	if cfg.Fsync == "always" && !cfg.Clustered() {
		sync = partition.SyncAlways
	}
	// The first listener's advertised address is the node's address in
	// the cluster and the default one in Metadata.
	lspecs, advertised, err := cfg.listeners()
	if err != nil {
		return err
	}
	adv := advertised[primaryListener(lspecs).Name]
	host, port, _ := splitHostPort(adv)
	// Cluster links (raft, admin) over mutual TLS when configured.
	clusterCerts, err := cfg.clusterCerts()
	if err != nil {
		return err
	}
	raftTLS, raftDialTLS := clusterTLS(clusterCerts)
	// The admin endpoint's signing key (nil: mutual TLS alone).
	var linkSecret *linkAuth
	if cfg.ClusterSecretFile != "" {
		if linkSecret, err = readSecretFiles(cfg.ClusterSecretFile, cfg.ClusterSecretAcceptFile); err != nil {
			return err
		}
	}

	// The replicator: a Local one, or raft. In cluster mode the broker
	// state lives in data/state; at start raft restores its latest snapshot
	// there (re-linking, not copying) and applies the entries after it.
	var (
		repl      cluster.Replicator
		raftRepl  *cluster.Raft
		raftPort  *cluster.RaftPort // shared by the raft groups (--raft-groups)
		pgroups   *partitionGroups  // nil: no partition groups
		nodes     *cluster.Nodes
		stateDir  = cfg.DataDir
		clusterID string
		err2      error
		// live is what a snapshot installed on the running node closes,
		// restores and reopens in place; set once everything is open.
		live = &liveState{logger: logger}
	)
	if cfg.Clustered() {
		stateDir = filepath.Join(cfg.DataDir, "state")
		peers, _ := parsePeers(cfg.Peers)
		self := cluster.Peer{ID: cfg.NodeID, Kafka: adv, Raft: cfg.RaftListen, Admin: cfg.AdminListen}
		replicaLag, _ := cfg.replicaLagMax() // checked by Validate
		metaOpts := cluster.RaftOptions{
			Self: self, Dir: filepath.Join(cfg.DataDir, "raft"), StateDir: stateDir,
			Peers: peers, Join: cfg.Join, Logger: logger,
			// An installed snapshot loads in place; the node restarts
			// only if that fails.
			OnInstall: live.install, OnRuntimeRestore: reexec,
			OnApplyFailure:    haltOnApplyFailure,
			Observer:          tel.RaftObserver(),
			SnapshotThreshold: cfg.RaftSnapshotThreshold,
			SnapshotInterval:  cfg.RaftSnapshotInterval,
			TrailingLogs:      cfg.RaftTrailingLogs,
			SnapshotBytes:     cfg.RaftSnapshotBytes,
			ReplicaLagMax:     replicaLag,
			// A node with no raft state waits for the leader's first
			// entries or snapshot before opening its state, so that a
			// snapshot installs in place instead of restarting the node.
			StartWait: raftStartWait,
			Stop:      ctx.Done(),
			TLS:       raftTLS,
			DialTLS:   raftDialTLS,
			// Without TLS, the cluster secret authenticates raft links
			// too.
			LinkSecrets: linkSecret.raftSecrets(),
		}
		if cfg.RaftGroups > 0 {
			// One raft port for the metadata group and the partition
			// groups; a metadata snapshot installed on this node holds
			// the groups' applies while it reopens every partition.
			if raftPort, err2 = cluster.OpenRaftPort(cluster.RaftPortOptions{Bind: cfg.RaftListen, Advertise: cfg.RaftListen,
				TLS: raftTLS, DialTLS: raftDialTLS, LinkSecrets: metaOpts.LinkSecrets, Logger: logger}); err2 != nil {
				return err2
			}
			defer raftPort.Close()
			metaOpts.Port = raftPort
			// The metadata group and the partition groups split the
			// leader's log cache (cluster.RaftOptions.CacheShare).
			metaOpts.CacheShare = cfg.RaftGroups + 1
			pgroups = &partitionGroups{logger: logger}
			metaOpts.OnInstall = pgroups.holdApplies(live.install)
		}
		if raftRepl, err2 = cluster.NewRaft(metaOpts); err2 != nil {
			return err2
		}
		if cfg.RaftGroups > 0 {
			if err := pgroups.open(cfg.RaftGroups, metaOpts, cfg.DataDir, raftRepl); err != nil {
				_ = raftRepl.Shutdown()
				return err
			}
			// On an early return; a run that served stops them with the
			// metadata group, below (Shutdown runs once).
			defer func() { _ = pgroups.shutdown() }()
		}
		nodes, err2 = cluster.OpenNodes(stateDir)
		if err2 != nil {
			_ = raftRepl.Shutdown()
			return err2
		}
		if err2 = checkCoordinatorShards(nodes, cfg.RaftGroups); err2 != nil {
			_ = raftRepl.Shutdown()
			return err2
		}
		raftRepl.Register(cluster.NodesKey, nodes)
		repl = raftRepl
		tel.SetReplicator("raft")
		if err2 = tel.ObserveRaft(func() cluster.Status { return raftRepl.Status(nodes.Get) }); err2 != nil {
			_ = raftRepl.Shutdown()
			return err2
		}
	} else {
		repl = cluster.NewLocal()
		if clusterID, err2 = loadClusterID(cfg.DataDir); err2 != nil {
			return err2
		}
	}
	voters := func() int { return 1 }
	if raftRepl != nil {
		voters = func() int { return len(raftRepl.Voters()) }
	}

	start := time.Now()
	producerBudget := partition.NewProducerBudget(cfg.MaxProducerStates)
	regOpts := topics.Options{DataDir: stateDir, Root: system.Root, Sync: sync, Repl: repl, Broker: broker, Logger: logger, Voters: voters,
		Producers: producerBudget, MaxPartitions: cfg.MaxPartitions}
	var reg *topics.Registry
	if pgroups != nil {
		reg, err = pgroups.openRegistry(regOpts, cfg.DataDir)
	} else {
		reg, err = topics.Open(regOpts)
	}
	if err != nil {
		return fmt.Errorf("open topics: %w", err)
	}
	logger.Info("recovered topics", "topics", len(reg.List()), "took", time.Since(start).Round(time.Millisecond))
	// leadsPartition reports whether this node decides partition i of t's
	// maintenance (retention, compaction): it leads the partition's raft
	// group (the single node always does).
	leadsPartition := func(t *topics.Topic, i int32) bool {
		if raftRepl == nil {
			return true
		}
		if r := pgroups.group(t.PartitionGroup(i)); r != nil {
			return r.Ready()
		}
		return raftRepl.Ready()
	}
	// SCRAM credentials: opened whatever the listeners, so that users can
	// be created before a SASL listener is turned on.
	userStore, err := users.Open(users.Options{DataDir: stateDir, Repl: repl, Logger: logger})
	if err != nil {
		return fmt.Errorf("open SCRAM credentials: %w", err)
	}
	defer userStore.Close()
	pids, err := protocol.NewProducerIDs(stateDir, repl)
	if err != nil {
		return err
	}
	// GROUP configs: opened before the group coordinator, which reads
	// each KIP-848 group's session timeout and heartbeat interval there.
	groupConfigs, err := groupconfig.Open(groupconfig.Options{DataDir: stateDir, Repl: repl, Logger: logger,
		Broker: func() map[string]string { return reg.Broker().Overrides }})
	if err != nil {
		return fmt.Errorf("open group configs: %w", err)
	}
	defer groupConfigs.Close()
	deps := shardDeps{cfg: cfg, root: system.Root, logger: logger, broker: broker, fsync: sync == partition.SyncAlways, reg: reg, groupConfigs: groupConfigs,
		markers: func(t string, p int32) txn.TxnPartition {
			if pgroups != nil {
				return pgroups.markerTarget(reg, t, p)
			}
			if pp := reg.Partition(t, p); pp != nil {
				return pp
			}
			return nil // not a nil *Partition: the interface would be non-nil
		}}
	// The metadata group's coordinators (the only ones without partition
	// groups). With partition groups every transaction coordinator hands
	// offsets to the group's coordinator wherever it is (offsetsRouter).
	var coords *coordinatorShards
	var zeroSink txn.OffsetsSink
	router := &offsetsRouter{} // bound once the shards are open, before raft starts
	if pgroups != nil {
		zeroSink = router
	}
	zero, err := openCoordShard(deps, stateDir, repl, pids, zeroSink)
	if err != nil {
		return err
	}
	groups, txns, shareMgr := zero.groups, zero.txns, zero.share
	if pgroups != nil {
		if coords, err = pgroups.openCoordinatorShards(deps, cfg.DataDir, nodes, raftRepl, zero); err != nil {
			return err
		}
		router.cs = coords
		reg.OnDelete(func(name string) {
			// Kafka drops a deleted topic's committed offsets; each
			// node's active coordinators drop theirs.
			for _, g := range coords.Shards() {
				coords.Groups(g).TopicsDeleted(name)
			}
		})
	}
	// ACLs are replicated and kept whatever --authorizer says, so that a
	// node started without one still applies the cluster's changes.
	aclStore, err := acls.Open(acls.Options{DataDir: stateDir, Repl: repl, Logger: logger})
	if err != nil {
		return fmt.Errorf("open acls: %w", err)
	}
	defer aclStore.Close()
	featureStore, err := features.Open(features.Options{DataDir: stateDir, NodeID: cfg.NodeID, Repl: repl, Logger: logger})
	if err != nil {
		return fmt.Errorf("open finalized features: %w", err)
	}
	defer featureStore.Close()
	if raftRepl == nil {
		// A cluster's leader fixes the first levels once it leads.
		if err := featureStore.Init(); err != nil {
			return err
		}
	} else {
		// A produce is replicated as checked only once every node can
		// read that (the finalized regent.raft.version).
		partition.SetCheckedAppends(func() bool {
			return featureStore.Finalized().Level(features.RegentRaftVersion) >= 1
		})
	}
	// Client quotas: replicated and kept on every node, as ACLs are.
	quotaStore, err := quotas.Open(quotas.Options{DataDir: stateDir, Repl: repl, Logger: logger})
	if err != nil {
		return fmt.Errorf("open client quotas: %w", err)
	}
	defer quotaStore.Close()
	// CLIENT_METRICS subscriptions are replicated and kept whatever the
	// client telemetry flags say, as ACLs are.
	cmStore, err := clientmetrics.Open(clientmetrics.Options{DataDir: stateDir, Repl: repl, Logger: logger})
	if err != nil {
		return fmt.Errorf("open client metrics subscriptions: %w", err)
	}
	defer cmStore.Close()
	if raftRepl != nil {
		live.setFeatures(featureStore)
		live.setGroupConfigs(groupConfigs)
		live.setQuotas(quotaStore)
		live.setClientMetrics(cmStore)
		live.setShare(shareMgr)
		live.set(nodes, reg, userStore, pids, groups, txns, aclStore)
	}
	pcfg := protocol.Config{NodeID: cfg.NodeID, Host: host, Port: port, ClusterID: clusterID, DataDir: stateDir, Logger: logger, Rack: cfg.Rack,
		PartitionGroups: pgroups != nil}
	// One memory setting: the edge's request and response budgets and the
	// fetch budget are shares of it (netio.Budgets).
	budgets := netio.NewBudgets(cfg.MaxMemory)
	pcfg.FetchBudget, pcfg.ResponseBudget = budgets.Fetch, budgets.Response
	setMemoryLimit(cfg.MaxMemory, logger)
	var admin *adminServer
	var peerLs *peerListeners // the other nodes' listeners (cluster mode)
	if raftRepl != nil {
		peers, _ := parsePeers(cfg.Peers)
		self := cluster.Peer{ID: cfg.NodeID, Kafka: adv, Raft: cfg.RaftListen, Admin: cfg.AdminListen}
		view := newRaftView(raftRepl, nodes, append(peers, self), cfg.NodeID)
		stopProbe := make(chan struct{})
		defer close(stopProbe)
		go view.probe(stopProbe)
		peerLs = newPeerListeners(view, clusterCerts)
		view.rackOf = peerLs.rackOf(cfg.Rack)
		go peerLs.run(stopProbe)
		pcfg.Cluster = view
		// Followers serve no reads unless racks are set (reads from
		// followers): their appends leave the page cache once written
		// back (storage/dropbehind.go); the leader keeps them for its
		// consumers.
		// With partition groups a node leads some partitions and follows
		// the others: it keeps its appends cached (write-behind still
		// bounds what is dirty).
		followersRead := cfg.Rack != "" || pgroups != nil
		storage.DefaultFileCache().SetDropBehind(!followersRead)
		storage.DefaultFileCache().SetWriteBehind(true)
		// The first levels are guessed before the new leader takes a
		// request (a topic created then would read as a state directory
		// from before finalized features).
		raftRepl.OnLeaderSettled(featureStore.Guess)
		raftRepl.OnLeadership(func(leader bool) {
			storage.DefaultFileCache().SetDropBehind(!leader && !followersRead)
			if !leader {
				zero.deactivate()
				return
			}
			onLeader(raftRepl, nodes, self, peers, zero, cfg.RaftGroups, featureStore, logger)
		})
		raftRepl.Start()
		if pgroups != nil {
			view.groups = pgroups
			pgroups.start()
			if on, every, _ := cfg.leaderRebalance(); on { // checked by Validate
				go pgroups.rebalance(view, cfg.NodeID, every, stopProbe)
			}
		}
		if cfg.AdminListen != "" {
			if admin, err = startAdmin(cfg.AdminListen, raftRepl, pgroups, nodes, clusterCerts, linkSecret, logger); err != nil {
				return err
			}
			defer admin.close()
			if pgroups != nil {
				admin.serveGroupLeadership(pgroups)
				admin.serveGroupVoters(pgroups)
				admin.serveTxnOffsets(coords)
				view.askTransfer = admin.askTransfer
			}
			admin.serveACLs(aclStore)
			admin.serveListeners(advertised, cfg.Rack)
		}
	}
	srv := protocol.NewServer(pcfg, reg, pids, groups, txns)
	if coords != nil {
		srv.SetCoordinators(coords)
	}
	if admin != nil {
		// Followers forward admin requests to the leader (KIP-590).
		admin.serveForwarding(srv)
		if pgroups != nil {
			// Transaction markers for partitions led by other nodes.
			client := forwardClient(admin.client)
			pgroups.setForwarder(func(ctx context.Context, node int32, fr protocol.ForwardedRequest) ([]byte, uint64, error) {
				return admin.forwardKafka(ctx, client, node, fr)
			}, admin.postGroup)
		}
	}
	if cfg.Authorizer == "acl" {
		// allow.everyone.if.no.acl.found is read-only: read it once.
		allowEveryone := strings.EqualFold(reg.Broker().Overrides["allow.everyone.if.no.acl.found"], "true")
		srv.SetAuthorizer(acls.NewAuthorizer(aclStore, acls.ParseSuperUsers(cfg.SuperUsers), func() bool { return allowEveryone }), tel.DenialObserver())
		logger.Info("authorizer on", "acls", aclStore.Set().Len(), "super_users", cfg.SuperUsers, "allow_everyone_if_no_acl_found", allowEveryone)
	}
	srv.SetUsers(userStore)
	tokenCfg, tokenCheck := tokenSettings(overrides)
	srv.SetTokens(tokenCfg)
	if len(tokenCfg.Secret) > 0 {
		go purgeExpiredTokens(ctx, userStore, tokenCheck, logger)
	}
	srv.SetFeatures(featureStore)
	srv.SetGroupConfigs(groupConfigs)
	if coords != nil {
		coords.wireShare(srv, groupConfigs)
	} else {
		wireShare(srv, groups, shareMgr, shareMgr, groupConfigs, logger)
	}
	quotaEnf := quotas.NewEnforcer(quotas.EnforcerConfig{}, quotaStore.Snapshot)
	srv.SetQuotas(quotaStore, quotaEnf)
	if err := tel.ObserveQuotas(quotaEnf); err != nil {
		return err
	}
	stopClientTelemetry, err := serveClientMetrics(cfg, cmStore, srv, tel, logger)
	if err != nil {
		return err
	}
	defer stopClientTelemetry()
	listeners, err := buildListeners(ctx, cfg, lspecs, advertised, userStore, tel, logger)
	if err != nil {
		return err
	}
	if peerLs != nil {
		for _, l := range listeners {
			l.Peer = peerLs.lookup(l.Name)
		}
	}
	if raftRepl != nil {
		nodePIDs, err := protocol.OpenNodeProducerIDs(cfg.DataDir, cfg.NodeID)
		if err != nil {
			return err
		}
		srv.SetNodeProducerIDs(nodePIDs)
	}
	listenerCerts, err := cfg.listenerCerts(lspecs)
	if err != nil {
		return err
	}
	reloadOnSIGHUP(ctx, logger, listenerCerts, clusterCerts)
	// One netio server per listener; they share the memory budgets (and
	// so the bounds), MaxConnections applies to each. SSL and SASL_SSL
	// ones are served by netio's crypto/tls front door.
	// Shared by the listeners; its bounds, and each listener's
	// MaxConnections, follow the connection keys (set below).
	perIP := netio.NewAdjustablePerIPLimit(-1, nil)
	loops := eventLoopsPerListener(cfg.EventLoops, listeners)
	var nsrvs []*netio.Server
	for i, l := range listeners {
		var tlsCfg *tls.Config
		if tlsListener(l.Security) {
			tlsCfg = listenerCerts.ServerConfig()
			logger.Info("TLS listener", "listener", l.Name, "addr", lspecs[i].Addr, "client_auth", cfg.TLSClientAuth)
		}
		nsrvs = append(nsrvs, netio.New(netio.Config{
			TLS:  tlsCfg,
			Addr: lspecs[i].Addr, Multicore: true, EventLoops: loops, Logger: logger.With("listener", l.Name),
			MaxConnections: cfg.MaxConnections, IdleTimeout: cfg.IdleTimeout, PerIP: perIP,
			Budgets:  budgets,
			Observer: tel.Observer(),
			Listener: l,
			ConnectionThrottle: func(addr netip.Addr, now time.Time) time.Duration {
				if !quotaEnf.Limits(quotas.ConnectionCreationRate) {
					return 0 // no ip quota: not even the address's text
				}
				return quotaEnf.Connect(addr.String(), now)
			},
		}, srv))
	}
	if err := tel.ObserveProducerStates(func() (int64, int64) { return producerBudget.Held(), producerBudget.Limit() }); err != nil {
		return fmt.Errorf("producer-state metrics: %w", err)
	}
	// With coordinators spread over raft groups, the node's sums: each
	// group's coordinator has its own bounds.
	txnHeld, pendingHeld, groupsHeld := txns.Held, groups.PendingHeld, groups.Held
	if coords != nil {
		txnHeld, pendingHeld, groupsHeld = coords.txnsHeld, coords.pendingHeld, coords.groupsHeld
	}
	if err := tel.ObserveTransactionalIDs(heldAndLimit(txnHeld)); err != nil {
		return fmt.Errorf("transactional-id metrics: %w", err)
	}
	if err := tel.ObservePendingMembers(pendingHeld); err != nil {
		return fmt.Errorf("pending member metrics: %w", err)
	}
	if err := tel.ObserveGroups(heldAndLimit(groupsHeld)); err != nil {
		return fmt.Errorf("group metrics: %w", err)
	}
	if err := tel.ObservePartitions(heldAndLimit(reg.Held)); err != nil {
		return fmt.Errorf("partition metrics: %w", err)
	}
	if reserve != nil {
		if err := tel.ObserveDiskReserve(reserve.State); err != nil {
			return fmt.Errorf("disk reserve metrics: %w", err)
		}
	}

	if err := tel.ObserveMemory(func() ([]telemetry.MemoryBudget, []telemetry.ConnectionsClosed) {
		st := nsrvs[0].MemoryStats()
		bs := make([]telemetry.MemoryBudget, len(st.Budgets))
		for i, b := range st.Budgets {
			bs[i] = telemetry.MemoryBudget{Name: b.Name, Used: b.Used, Capacity: b.Capacity}
		}
		cs := make([]telemetry.ConnectionsClosed, len(st.Closed))
		for i, c := range st.Closed {
			cs[i] = telemetry.ConnectionsClosed{Reason: c.Reason, Count: c.Count}
		}
		for _, o := range nsrvs[1:] {
			for i, c := range o.MemoryStats().Closed {
				cs[i].Count += c.Count
			}
		}
		return bs, cs
	}); err != nil {
		return err
	}
	if err := tel.ObserveHandoffs(func() int64 {
		var n int64
		for _, o := range nsrvs {
			n += o.MemoryStats().HandedOff
		}
		return n
	}); err != nil {
		return fmt.Errorf("handoff metrics: %w", err)
	}
	// Consumer-group lag: at each scrape, every group's committed offsets.
	tel.SetCommittedOffsets(func(emit func(group, topic string, partition int32, offset int64)) {
		committedOffsets(groups, emit)
		if coords != nil {
			for _, g := range coords.Shards()[1:] {
				committedOffsets(coords.Groups(g), emit)
			}
		}
	})
	topicName := func(id [16]byte) string {
		if t := reg.GetByID(id); t != nil {
			return t.Name
		}
		return ""
	}
	connections := func() int64 {
		var n int64
		for _, o := range nsrvs {
			n += o.OpenConnections()
		}
		return n
	}
	if err := tel.ObserveBroker(telemetry.Broker{ForEachPartition: reg.ForEachPartition, Connections: connections, TopicName: topicName}); err != nil {
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
	// Each listener's Run ends with its index: a listener that failed
	// (its address taken) is not stopped again nor waited for.
	type ended struct {
		i   int
		err error
	}
	errc := make(chan ended, len(nsrvs))
	// max.connections and max.connections.per.ip(.overrides): the flags'
	// values at start, then whatever kafka-configs sets (on every node).
	reg.OnBrokerChange(func(b logconfig.Broker) {
		maxConns, ipMax, ipOverrides := b.ConnectionLimits()
		for _, o := range nsrvs {
			o.SetMaxConnections(maxConns)
		}
		perIP.Set(ipMax, ipOverrides)
	})
	for i, o := range nsrvs {
		go func() { errc <- ended{i, o.Run()} }()
	}
	failed := -1

	flush := time.NewTicker(cfg.FlushInterval)
	defer flush.Stop()
	maintain := time.NewTicker(cfg.RetentionCheck)
	defer maintain.Stop()
	compact := time.NewTicker(cfg.CompactionCheck)
	defer compact.Stop()
	refill := time.NewTicker(time.Second)
	defer refill.Stop()
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case e := <-errc:
			runErr, failed = e.err, e.i
			if runErr == nil {
				runErr = fmt.Errorf("listener %s stopped", listeners[e.i].Name)
			}
			break loop
		case <-flush.C:
			// In cluster mode the raft log is the durable copy; raft
			// snapshots fsync the state files they name.
			if sync == partition.SyncInterval && raftRepl == nil {
				reg.ForEachPartition((*partition.Partition).Sync)
				if err := groups.Sync(); err != nil {
					logger.Error("fsync group store", "err", err)
				}
				if err := txns.Sync(); err != nil {
					logger.Error("fsync transaction store", "err", err)
				}
				if err := shareMgr.Sync(); err != nil {
					logger.Error("fsync share-partition store", "err", err)
				}
			}
		case <-maintain.C:
			// Retention and compaction are decided by the raft leader
			// alone, on its clock, and reach every node as replicated
			// commands (a log-start move, a compaction pass in offsets), so
			// all nodes keep the same log start and the same surviving
			// offsets (single node: decided and applied here).
			// With partition groups, each partition's group leader.
			reg.ForEachPartitionOf(func(t *topics.Topic, i int32, p *partition.Partition) { p.Maintain(leadsPartition(t, i)) })
		case <-refill.C:
			// Cheap while the reserve is in place; after a full disk used
			// it, appends resume once it is made again.
			reserve.Refill()
		case <-compact.C:
			// Compaction alone, on Kafka's cleaner cadence: a topic with
			// a short max.compaction.lag.ms is compacted within it, not
			// within the longer retention interval.
			reg.ForEachPartitionOf(func(t *topics.Topic, i int32, p *partition.Partition) {
				if t.Config.CleanupCompact && leadsPartition(t, i) {
					p.CheckCompaction()
				}
			})
		}
	}
	logger.Info("shutting down")
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running := 0
	for i, o := range nsrvs {
		if i == failed {
			continue
		}
		running++
		if err := o.Stop(stopCtx); err != nil {
			logger.Warn("network stop", "err", err, "listener", listeners[i].Name)
		}
	}
	for range running {
		select {
		case <-errc:
		case <-stopCtx.Done():
		}
	}
	// Requests are over: flush their spans, stop serving metrics.
	stopTelemetry()
	if raftRepl != nil {
		// Stop applying before the appliers close: the partition groups
		// first, which follow the metadata group.
		if err := pgroups.shutdown(); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("stop the partition raft groups: %w", err))
		}
		if err := raftRepl.Shutdown(); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("stop raft: %w", err))
		}
	}
	if coords != nil {
		if err := coords.close(); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("close the partition groups' coordinators: %w", err))
		}
	}
	if err := shareMgr.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("close share-partitions: %w", err))
	}
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

// raftStartWait bounds how long a node with no raft state waits for the
// leader before opening its state (cluster.RaftOptions.StartWait).
const raftStartWait = 2 * time.Minute

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

// setMemoryLimit sets the Go runtime's soft memory limit from --max-memory,
// unless GOMEMLIMIT is set: the budgets bound what the broker holds, and
// the limit makes the collector return garbage (old frame buffers, encoded
// responses) before the heap doubles past them. The headroom above the
// budgets is for everything else the broker keeps (indexes, actors, raft).
func setMemoryLimit(maxMemory int64, logger *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := maxMemory + maxMemory/2
	debug.SetMemoryLimit(limit)
	logger.Debug("go memory limit set", "bytes", limit)
}

// heldAndLimit adapts a coordinator's or registry's Held to a gauge pair's
// reader.
func heldAndLimit(held func() (int, int)) func() (int64, int64) {
	return func() (int64, int64) {
		h, l := held()
		return int64(h), int64(l)
	}
}
