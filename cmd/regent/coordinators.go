package main

// Coordinators spread over the partition raft groups (protocol's
// coordinators.go says what the protocol does with them). Every raft group
// g has its own group coordinator, transaction coordinator, share-partition
// manager and transactional producer-id allocator, kept in the group's
// state directory (so its snapshots carry them) and replicated by the
// group's raft; they serve while this node leads the group and stand by
// otherwise. Group 0, the metadata group, has run's coordinators. How many
// groups coordinators are spread over is fixed by the cluster's first
// leader (cluster.SetCoordinatorShards): --raft-groups for a new cluster,
// 0 (the metadata group alone) for a cluster that already had
// coordinator state, so no key's state is ever left on another group.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/groupconfig"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/actors/share"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/actors/txn"
	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/storage/logconfig"
)

// coordShard is one raft group's coordinators on this node.
type coordShard struct {
	pids   *protocol.ProducerIDs
	groups *group.Manager
	txns   *txn.Coordinator
	share  *share.Manager
}

// shardDeps is what every shard's coordinators are opened with.
type shardDeps struct {
	cfg          Config
	root         *actor.RootContext
	logger       *slog.Logger
	broker       logconfig.Broker
	fsync        bool
	reg          *topics.Registry
	groupConfigs *groupconfig.Store
	// markers finds a partition for the transaction coordinators' markers.
	markers func(topic string, partition int32) txn.TxnPartition
	// budgetShare divides the node's coordinator budgets (--max-groups,
	// --max-transactional-ids, pending member ids) among the shards that
	// take keys, so that a node leading all of them holds no more than
	// the flags say; 0 or 1: a shard gets them whole.
	budgetShare int
}

// shareOf is a shard's part of a node-wide budget (0: none).
func (d shardDeps) shareOf(limit int) int {
	if limit <= 0 || d.budgetShare <= 1 {
		return limit
	}
	return (limit + d.budgetShare - 1) / d.budgetShare
}

// openCoordShard opens the coordinators kept in dir and replicated by
// repl, the transaction coordinator allocating ids from pids and handing
// transactional offsets to offsets (nil: this shard's own group
// coordinator). On error what was opened is closed.
func openCoordShard(d shardDeps, dir string, repl replication.Replicator, pids *protocol.ProducerIDs, offsets txn.OffsetsSink) (*coordShard, error) {
	cfg, groupConfigs := d.cfg, d.groupConfigs
	groups, err := group.NewManager(group.Options{DataDir: dir, Root: d.root, Logger: d.logger, Broker: d.broker, Fsync: d.fsync, Repl: repl, Standby: cfg.Clustered(),
		GroupConsumerTimeouts: func(g string) (time.Duration, time.Duration) {
			ct := groupConfigs.Consumer(g)
			return ct.SessionTimeout, ct.HeartbeatInterval
		},
		GroupShareTimeouts: func(g string) (time.Duration, time.Duration) {
			v := groupConfigs.Values(g)
			return v.ShareSessionTimeout, v.ShareHeartbeatInterval
		},
		GroupStreamsConfigs: func(g string) (time.Duration, time.Duration, int) {
			v := groupConfigs.Values(g)
			return v.StreamsSessionTimeout, v.StreamsHeartbeatInterval, v.StreamsNumStandbyReplicas
		},
		MaxGroups: d.shareOf(cfg.MaxGroups), MaxPendingIDs: d.shareOf(group.DefaultMaxPendingIDs)})
	if err != nil {
		return nil, fmt.Errorf("open groups: %w", err)
	}
	shareMgr, err := openShare(dir, d.root, d.reg, groupConfigs, repl, d.fsync, cfg.Clustered(), d.logger)
	if err != nil {
		_ = groups.Close()
		return nil, fmt.Errorf("open share-partitions: %w", err)
	}
	if offsets == nil {
		offsets = groups
	}
	// Validate checked it: the error cannot happen here.
	idExpiration, _ := cfg.txnIDExpiration()
	txns, err := txn.NewCoordinator(txn.Options{
		DataDir: dir, Root: d.root, Logger: d.logger, Repl: repl, Standby: cfg.Clustered(),
		NextProducerID: pids.Next, Offsets: offsets, Fsync: d.fsync,
		MaxTimeout: cfg.TxnMaxTimeout, IDExpiration: idExpiration, MaxIDs: d.shareOf(cfg.MaxTransactionalIDs),
		Partitions: d.markers,
	})
	if err != nil {
		_ = shareMgr.Close()
		_ = groups.Close()
		return nil, fmt.Errorf("open transactions: %w", err)
	}
	return &coordShard{pids: pids, groups: groups, txns: txns, share: shareMgr}, nil
}

// activate starts serving (this node leads the shard's raft group and has
// applied what earlier leaders committed).
func (c *coordShard) activate(logger *slog.Logger) {
	c.pids.Resume()
	if err := c.groups.Activate(); err != nil {
		logger.Error("start the group coordinator", "err", err)
	}
	if err := c.txns.Activate(); err != nil {
		logger.Error("start the transaction coordinator", "err", err)
	}
	if err := c.share.Activate(); err != nil {
		logger.Error("start the share-partitions", "err", err)
	}
}

// deactivate returns to standby.
func (c *coordShard) deactivate() {
	c.share.Deactivate()
	c.txns.Deactivate()
	c.groups.Deactivate()
}

// close closes the shard's stores (the raft group no longer applies).
func (c *coordShard) close() error {
	return errors.Join(c.share.Close(), c.txns.Close(), c.groups.Close())
}

// reopen closes the stores, runs restore (a snapshot installed on this
// node rewrote the group's state directory) and reopens them on it.
func (c *coordShard) reopen(restore func() error) error {
	if err := c.close(); err != nil {
		return fmt.Errorf("close the coordinators for the installed snapshot: %w", err)
	}
	if err := restore(); err != nil {
		return err
	}
	for _, step := range []struct {
		what   string
		reopen func() error
	}{
		{"producer ids", c.pids.Reload},
		{"groups", c.groups.Reopen},
		{"share-partitions", c.share.Reopen},
		{"transactions", c.txns.Reopen},
	} {
		if err := step.reopen(); err != nil {
			return fmt.Errorf("reopen %s on the installed snapshot: %w", step.what, err)
		}
	}
	return nil
}

// coordinatorShards are this node's coordinators of every raft group; they
// implement protocol.Coordinators.
type coordinatorShards struct {
	nodes  *cluster.Nodes
	meta   *cluster.Raft
	pg     *partitionGroups
	logger *slog.Logger
	// shards[g] is raft group g's; fixed once open (0: run's).
	shards []*coordShard
	// all is every shard's index, for Shards.
	all []uint8
	// warned is set once a key was placed on a group this node does not
	// run (its --raft-groups is below the cluster's coordinator shards).
	warned atomic.Bool
}

// openCoordinatorShards opens groups 1..n's coordinators beside shard 0's
// and registers their activation with each group's leadership; under
// pg.mu, so that no group snapshot is installed while they open.
func (pg *partitionGroups) openCoordinatorShards(d shardDeps, dataDir string, nodes *cluster.Nodes, meta *cluster.Raft, zero *coordShard) (*coordinatorShards, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	cs := &coordinatorShards{nodes: nodes, meta: meta, pg: pg, logger: d.logger, shards: []*coordShard{zero}, all: []uint8{0}}
	sink := &offsetsRouter{cs: cs}
	// Keys go to shards 1..count once the count is fixed, and a new
	// cluster fixes it at this node's group count (count 0: every key on
	// shard 0, these shards hold nothing); so the budgets are split that
	// many ways, and the node's total stays within each flag.
	d.budgetShare = len(pg.rafts)
	if n, set := nodes.CoordinatorShards(); set && n > 0 {
		d.budgetShare = n
	}
	for i, r := range pg.rafts {
		g := uint8(i + 1)
		_, dir := groupDirs(dataDir, g)
		dg := d
		dg.logger = d.logger.With("raft_group", g)
		pids, err := protocol.NewShardProducerIDs(dir, g, r)
		if err == nil {
			var c *coordShard
			if c, err = openCoordShard(dg, dir, r, pids, sink); err == nil {
				cs.shards = append(cs.shards, c)
				cs.all = append(cs.all, g)
				logger := dg.logger
				r.OnLeadership(func(leader bool) {
					if leader {
						c.activate(logger)
					} else {
						c.deactivate()
					}
				})
				continue
			}
		}
		for _, c := range cs.shards[1:] {
			_ = c.close()
		}
		return nil, fmt.Errorf("open raft group %d's coordinators: %w", g, err)
	}
	pg.coords = cs
	return cs, nil
}

// install reloads group g's coordinators around reload (the group's
// snapshot restore and its partitions' reload); called with pg.mu held.
func (cs *coordinatorShards) install(g uint8, reload func() error) error {
	if int(g) >= len(cs.shards) {
		return reload()
	}
	return cs.shards[g].reopen(reload)
}

// close closes groups 1..n's coordinators (shard 0 is run's).
func (cs *coordinatorShards) close() error {
	var errs []error
	for _, c := range cs.shards[1:] {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// keyShard places key on one of n shards (1..n), as Kafka places a group
// on a __consumer_offsets partition by its id's hash.
func keyShard(key string, n int) uint8 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return uint8(1 + h.Sum32()%uint32(n))
}

// Shard implements protocol.Coordinators.
func (cs *coordinatorShards) Shard(key string) uint8 {
	n, _ := cs.nodes.CoordinatorShards()
	if n == 0 {
		return 0
	}
	g := keyShard(key, n)
	if int(g) >= len(cs.shards) {
		// Refused at start (checkCoordinatorShards); a count applied
		// later can only come from a node started with more groups.
		if cs.warned.CompareAndSwap(false, true) {
			cs.logger.Error("the cluster spreads its coordinators over more raft groups than this node runs: restart it with --raft-groups as on the others", "coordinator_shards", n, "raft_groups", len(cs.shards)-1)
		}
		return 0
	}
	return g
}

func (cs *coordinatorShards) Groups(g uint8) *group.Manager { return cs.shards[g].groups }
func (cs *coordinatorShards) Txns(g uint8) *txn.Coordinator { return cs.shards[g].txns }
func (cs *coordinatorShards) Shards() []uint8               { return cs.all }

// groupsHeld, pendingHeld and txnsHeld sum every shard's budget use, and
// the bounds of the shards that take keys (Shard), for the node's metrics:
// the others' bounds are budgets nothing can use.
func (cs *coordinatorShards) groupsHeld() (held, limit int) {
	return sumHeld(cs, func(c *coordShard) (int, int) { return c.groups.Held() })
}

func (cs *coordinatorShards) pendingHeld() (held, limit int64) {
	return sumHeld(cs, func(c *coordShard) (int64, int64) { return c.groups.PendingHeld() })
}

func (cs *coordinatorShards) txnsHeld() (held, limit int) {
	return sumHeld(cs, func(c *coordShard) (int, int) { return c.txns.Held() })
}

// sumHeld adds up one budget's use over every shard and its bound over
// the shards that take keys: shard 0 while the count is 0 or unset, else
// shards 1..count.
func sumHeld[T int | int64](cs *coordinatorShards, of func(*coordShard) (T, T)) (held, limit T) {
	n, _ := cs.nodes.CoordinatorShards()
	for g, c := range cs.shards {
		h, l := of(c)
		held += h
		if takesKeys(g, n) {
			limit += l
		}
	}
	return held, limit
}

// takesKeys reports whether Shard places keys on shard g when the
// coordinator count is n.
func takesKeys(g, n int) bool {
	if n == 0 {
		return g == 0
	}
	return g >= 1 && g <= n
}

// raft is raft group g (0: the metadata group).
func (cs *coordinatorShards) raft(g uint8) *cluster.Raft {
	if r := cs.pg.group(g); r != nil {
		return r
	}
	return cs.meta
}

// checkCoordinatorShards refuses a node that runs fewer raft groups than
// the cluster spreads its coordinators over.
func checkCoordinatorShards(nodes *cluster.Nodes, raftGroups int) error {
	if n, set := nodes.CoordinatorShards(); set && n > raftGroups {
		return fmt.Errorf("the cluster's group and transaction coordinators are spread over %d raft groups; this node runs %d: start it with --raft-groups %d, as the other nodes", n, raftGroups, n)
	}
	return nil
}

// fixCoordinatorShards is run by a new metadata leader before its
// coordinators start: the first leader of a new cluster spreads them over
// its partition groups; a cluster that already chose a cluster id (its
// coordinators have state on the metadata group) keeps them there.
func fixCoordinatorShards(r *cluster.Raft, nodes *cluster.Nodes, raftGroups int, logger *slog.Logger) {
	if _, set := nodes.CoordinatorShards(); set || raftGroups == 0 {
		return
	}
	n := raftGroups
	if nodes.ClusterID() != "" {
		n = 0
	}
	// Retried while this node leads: coordinators started before the
	// count is fixed would keep state on the metadata group that a key's
	// own group would then not see.
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		err := proposeWait(r, cluster.NodesKey, cluster.SetCoordinatorShards(n))
		if err == nil || !r.Ready() {
			if err != nil {
				logger.Warn("fix the coordinator shards", "err", err)
			}
			return
		}
		logger.Warn("fix the coordinator shards; retrying", "err", err)
		time.Sleep(backoff)
	}
}

// offsetsRouter is every transaction coordinator's OffsetsSink with
// coordinators spread: a group's offsets go to its coordinator, here or,
// for completions, on another node (POST /cluster/groups/{g}/txn-offsets).
// cs is set before the raft groups start (nothing is routed before).
type offsetsRouter struct{ cs *coordinatorShards }

// TxnCommitOffsets implements txn.OffsetsSink. It is reached only from a
// TxnOffsetCommit served here, where the group's coordinator is (the
// protocol checked), so the group's shard is local; one on standby
// answers NOT_COORDINATOR.
func (o *offsetsRouter) TxnCommitOffsets(req *kmsg.TxnOffsetCommitRequest, reply func(*kmsg.TxnOffsetCommitResponse)) {
	o.cs.Groups(o.cs.Shard(req.Group)).TxnCommitOffsets(req, reply)
}

// txnOffsetsTimeout bounds a completion sent to another node; the
// transaction coordinator retries one that failed.
const txnOffsetsTimeout = 30 * time.Second

// CompleteTxn implements txn.OffsetsSink.
func (o *offsetsRouter) CompleteTxn(groupID string, producerID int64, commit bool, done func(error)) {
	g := o.cs.Shard(groupID)
	r := o.cs.raft(g)
	if r.Ready() {
		o.cs.Groups(g).CompleteTxn(groupID, producerID, commit, done)
		return
	}
	leader, post := r.Leader(), o.cs.pg.poster()
	if leader < 0 || post == nil {
		done(kerr.NotCoordinator)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), txnOffsetsTimeout)
		defer cancel()
		err := post(ctx, leader, g, "txn-offsets", txnOffsetsCompletion{Group: groupID, ProducerID: producerID, Commit: commit})
		if err != nil {
			o.cs.logger.Info("complete a transaction's offsets on the group's coordinator", "group", groupID, "coordinator", leader, "err", err)
			err = kerr.NotCoordinator // retried
		}
		done(err)
	}()
}

// txnOffsetsCompletion is the body of POST /cluster/groups/{g}/txn-offsets.
type txnOffsetsCompletion struct {
	Group      string `json:"group"`
	ProducerID int64  `json:"producer_id"`
	Commit     bool   `json:"commit"`
}

// serveTxnOffsets adds POST /cluster/groups/{g}/txn-offsets: the node
// coordinating raft group g's groups commits or drops a producer's
// offsets staged in a group, as a transaction coordinator on another node
// asks (Kafka's marker on a __consumer_offsets partition). It answers once
// the outcome is durable.
func (a *adminServer) serveTxnOffsets(cs *coordinatorShards) {
	handleGroupPost(a, "txn-offsets", func(w http.ResponseWriter, r *http.Request, g uint8, body txnOffsetsCompletion, err error) {
		if err != nil || int(g) >= len(cs.shards) || body.Group == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("want a raft group of this node (0-%d) in the path and {\"group\": ID, \"producer_id\": N, \"commit\": BOOL}", len(cs.shards)-1)})
			return
		}
		if gr := cs.raft(g); !gr.Ready() {
			writeJSON(w, http.StatusConflict, map[string]any{"error": "this node does not lead the group", "leader": gr.Leader()})
			return
		}
		done := make(chan error, 1)
		cs.Groups(g).CompleteTxn(body.Group, body.ProducerID, body.Commit, func(err error) { done <- err })
		select {
		case err = <-done:
		case <-r.Context().Done():
			err = r.Context().Err()
		}
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{})
	})
}

// groupPoster sends a body to raft group g's leader's admin endpoint
// (POST /cluster/groups/{g}/{what}).
type groupPoster func(ctx context.Context, leader int32, g uint8, what string, body any) error

// wireShare serves the share data path with every shard's share-partition
// manager (shareRouter) and connects each coordinator's share groups to
// its own manager.
func (cs *coordinatorShards) wireShare(srv *protocol.Server, groupConfigs *groupconfig.Store) {
	srv.SetShare(shareRouter{cs: cs}, shareConfigs(groupConfigs))
	for _, c := range cs.shards {
		wireShareGroups(srv, c.groups, c.share, cs.logger)
	}
}

// shareRouter is the protocol's share core with coordinators spread: each
// call goes to the share-partition manager of its group's shard.
type shareRouter struct{ cs *coordinatorShards }

func (r shareRouter) of(group string) *share.Manager { return r.cs.shards[r.cs.Shard(group)].share }

func (r shareRouter) Acquire(req share.AcquireRequest, reply func(share.AcquireResult)) {
	r.of(req.Key.Group).Acquire(req, reply)
}
func (r shareRouter) Acknowledge(k share.Key, member string, acks []share.AckBatch, reply func(int16)) {
	r.of(k.Group).Acknowledge(k, member, acks, reply)
}
func (r shareRouter) ReleaseMember(k share.Key, member string, reply func(int16)) {
	r.of(k.Group).ReleaseMember(k, member, reply)
}
func (r shareRouter) ReleaseGroupMember(group, member string, reply func(int16)) {
	r.of(group).ReleaseGroupMember(group, member, reply)
}
func (r shareRouter) StartOffsets(group string, parts []share.TopicPartition, reply func([]share.StartOffset)) {
	r.of(group).StartOffsets(group, parts, reply)
}
func (r shareRouter) AlterStartOffsets(group string, offs []share.StartOffset, reply func([]share.StartOffsetResult)) {
	r.of(group).AlterStartOffsets(group, offs, reply)
}
func (r shareRouter) DeleteState(group string, topics []string, reply func(int16)) {
	r.of(group).DeleteState(group, topics, reply)
}
func (r shareRouter) DeleteGroup(group string, reply func(int16)) {
	r.of(group).DeleteGroup(group, reply)
}

// SetAvailableListener hears every shard's manager.
func (r shareRouter) SetAvailableListener(fn func(share.Key)) {
	for _, c := range r.cs.shards {
		c.share.SetAvailableListener(fn)
	}
}
