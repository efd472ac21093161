package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/clientmetrics"
	"github.com/regent-broker/regent/actors/features"
	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/groupconfig"
	"github.com/regent-broker/regent/actors/quotas"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/actors/share"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/actors/txn"
	"github.com/regent-broker/regent/actors/users"
	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/protocol"
)

// onLeader runs when this node becomes the caught-up raft leader: it
// records its addresses (and the initial peers') in the node directory,
// fixes the coordinator shards, the cluster id and the first finalized
// feature levels on first election, and starts the metadata group's
// coordinators.
func onLeader(r *cluster.Raft, nodes *cluster.Nodes, self cluster.Peer, peers []cluster.Peer, coords *coordShard, raftGroups int, feats *features.Store, logger *slog.Logger) {
	if cur, ok := nodes.Get(self.ID); !ok || cur != self {
		if err := proposeWait(r, cluster.NodesKey, cluster.UpsertNode(self)); err != nil {
			logger.Warn("record this node in the directory", "err", err)
		}
	}
	for _, p := range peers {
		if _, ok := nodes.Get(p.ID); !ok {
			if err := proposeWait(r, cluster.NodesKey, cluster.UpsertNode(p)); err != nil {
				logger.Warn("record a peer in the directory", "node", p.ID, "err", err)
			}
		}
	}
	// Before the cluster id: a new cluster is one without it.
	fixCoordinatorShards(r, nodes, raftGroups, logger)
	if nodes.ClusterID() == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if err := proposeWait(r, cluster.NodesKey, cluster.SetClusterID(base64.RawURLEncoding.EncodeToString(b[:]))); err != nil {
			logger.Warn("choose the cluster id", "err", err)
		}
	}
	if err := feats.Init(); err != nil {
		logger.Warn("fix the first finalized features", "err", err)
	}
	coords.activate(logger)
}

// liveState is what a cluster node has open in its state directory, so
// that a snapshot the leader installs on the running node can be loaded in
// place (cluster.RaftOptions.OnInstall): closed, restored, reopened. Every
// object is reopened in place, so the protocol server, the listeners,
// telemetry and the admin server keep their references.
type liveState struct {
	logger *slog.Logger
	// mu guards the objects: set by run once it has opened them all, read
	// by install on raft's FSM goroutine.
	mu struct {
		sync.Mutex
		set    bool
		nodes  *cluster.Nodes
		reg    *topics.Registry
		users  *users.Store
		pids   *protocol.ProducerIDs
		groups *group.Manager
		txns   *txn.Coordinator
		acls   *acls.Store
		// features is set apart (setFeatures), before set.
		features *features.Store
		// quotas is set apart (setQuotas), before set.
		quotas *quotas.Store
		// clientMetrics is set apart (setClientMetrics), before set.
		clientMetrics *clientmetrics.Store
		// groupConfigs is set apart (setGroupConfigs), before set.
		groupConfigs *groupconfig.Store
		// share is set apart (setShare), before set.
		share *share.Manager
	}
}

// setShare hands install the share-partition manager.
func (s *liveState) setShare(m *share.Manager) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.share = m
}

// setGroupConfigs hands install the GROUP config store.
func (s *liveState) setGroupConfigs(g *groupconfig.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.groupConfigs = g
}

// setClientMetrics hands install the CLIENT_METRICS store.
func (s *liveState) setClientMetrics(c *clientmetrics.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.clientMetrics = c
}

// setQuotas hands install the client quota store.
func (s *liveState) setQuotas(q *quotas.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.quotas = q
}

// setFeatures hands install the finalized feature store.
func (s *liveState) setFeatures(f *features.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.features = f
}

// set hands install the node's open state objects.
func (s *liveState) set(nodes *cluster.Nodes, reg *topics.Registry, us *users.Store, pids *protocol.ProducerIDs, groups *group.Manager, txns *txn.Coordinator, as *acls.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.nodes, s.mu.reg, s.mu.users, s.mu.pids, s.mu.groups, s.mu.txns, s.mu.acls = nodes, reg, us, pids, groups, txns, as
	s.mu.set = true
}

// install implements cluster.RaftOptions.OnInstall. It runs on raft's FSM
// goroutine while nothing is applied, on a follower (the leader sends
// snapshots, and raft waits for the restore before acting on anything
// else), so the group and transaction coordinators are on standby and
// requests touching partitions are refused before reaching them
// (NOT_LEADER_OR_FOLLOWER). It closes the objects in the reverse order of
// run's opening (what depends on another goes first), runs restore, and
// reopens them in run's order; each re-registers its appliers (the
// partitions' included). Any error leaves the state not serving the
// snapshot: the caller then restarts the node.
func (s *liveState) install(restore func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.set {
		return errors.New("the node is still opening its state")
	}
	start := time.Now()
	s.mu.acls.Close()
	s.mu.quotas.Close()
	errs := []error{s.mu.clientMetrics.Close(), s.mu.features.Close(), s.mu.share.Close(), s.mu.txns.Close(), s.mu.groups.Close(), s.mu.groupConfigs.Close(), s.mu.users.Close(), s.mu.reg.Close()}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close the state for the installed snapshot: %w", err)
	}
	closed := time.Since(start)
	if err := restore(); err != nil {
		return err
	}
	restored := time.Since(start)
	for _, step := range []struct {
		what   string
		reopen func() error
	}{
		{"the node directory", s.mu.nodes.Reload},
		{"topics", s.mu.reg.Reopen},
		{"SCRAM credentials", s.mu.users.Reopen},
		{"group configs", s.mu.groupConfigs.Reopen},
		{"producer ids", s.mu.pids.Reload},
		{"groups", s.mu.groups.Reopen},
		{"share-partitions", s.mu.share.Reopen},
		{"transactions", s.mu.txns.Reopen},
		{"acls", s.mu.acls.Reopen},
		{"finalized features", s.mu.features.Reopen},
		{"client quotas", s.mu.quotas.Reopen},
		{"client metrics subscriptions", s.mu.clientMetrics.Reopen},
	} {
		if err := step.reopen(); err != nil {
			return fmt.Errorf("reopen %s on the installed snapshot: %w", step.what, err)
		}
	}
	s.logger.Info("state reopened on the installed snapshot", "topics", len(s.mu.reg.List()),
		"closed_in", closed.Round(time.Millisecond), "restored_in", (restored - closed).Round(time.Millisecond),
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// reexec restarts the process in place (same pid, arguments and
// environment), to load a snapshot the leader installed: the fallback when
// it could not be loaded in place (liveState.install failed).
func reexec() {
	exe, err := os.Executable()
	if err != nil {
		slog.Error("cannot restart to load the installed snapshot", "err", err)
		return
	}
	err = syscall.Exec(exe, os.Args, os.Environ())
	slog.Error("cannot restart to load the installed snapshot", "err", err)
}

// applyFailureExit is the exit status of a node that stopped because a
// committed entry failed on its storage (haltOnApplyFailure).
const applyFailureExit = 74 // EX_IOERR

// haltOnApplyFailure stops the process at once, as Kafka halts a broker
// whose log directory failed: a committed raft entry could not be applied
// on this node's storage, and the node must not go on without it
// (cluster.RaftOptions.OnApplyFailure). Nothing is lost by not closing
// cleanly: what was applied is written, and the raft log holds the entry,
// which the node applies again after its restart.
func haltOnApplyFailure(err error) {
	if errors.Is(err, replication.ErrUnreadable) {
		slog.Error("stopping: a committed entry was written by a newer Regent than this node's; upgrade this node and restart it",
			"err", err, "exit_status", unreadableExit)
		os.Exit(unreadableExit)
	}
	slog.Error("stopping: a committed entry could not be applied on this node's storage (full disk? I/O error?); fix it and restart the node",
		"err", err, "exit_status", applyFailureExit)
	os.Exit(applyFailureExit)
}

// unreadableExit is the exit status of a node that stopped at a committed
// entry of a newer version (haltOnApplyFailure).
const unreadableExit = 65 // EX_DATAERR

// raftView is the protocol's view of a raft cluster. Voters are cached
// briefly: asking raft for its configuration is a round trip to its
// goroutine, and Metadata is frequent.
type raftView struct {
	r      *cluster.Raft
	nodes  *cluster.Nodes
	static map[int32]cluster.Peer // --peers and self, until the directory has them

	cache struct {
		sync.Mutex
		at     time.Time
		voters []int32
	}
	// down holds the voters whose Kafka port did not answer the last
	// probe; written by the prober goroutine.
	down struct {
		sync.RWMutex
		m map[int32]bool
	}
	self int32
	// rackOf is each node's rack (set once before serving; nil: none).
	rackOf func(id int32) string
	// groups are the partition raft groups (nil: none); set once before
	// serving.
	groups *partitionGroups
	// askTransfer asks another node to hand a partition group it leads
	// to a third (adminServer.askTransfer); nil without an admin
	// endpoint. Set once before serving.
	askTransfer func(ctx context.Context, leader int32, g uint8, to int32) error
}

func newRaftView(r *cluster.Raft, nodes *cluster.Nodes, static []cluster.Peer, self int32) *raftView {
	v := &raftView{r: r, nodes: nodes, static: map[int32]cluster.Peer{}, self: self}
	v.down.m = map[int32]bool{}
	for _, p := range static {
		v.static[p.ID] = p
	}
	return v
}

// probeDownAfter is how many probes in a row a voter's Kafka port must
// fail before Metadata hides it. One failed dial is not enough: on a
// loaded machine a live node's accept or this prober's own wake-up can
// miss the dial's deadline, and a live broker dropped from Metadata for
// a moment makes clients forget it (kgo then answers "unknown broker"
// for a request pinned to it). A killed node refuses at once, so three
// probes hide it within about 750 ms.
const probeDownAfter = 3

// probe checks every voter's Kafka port four times a second until stop
// closes.
// Metadata lists only nodes that answer, as Kafka lists only live
// brokers: clients drop a coordinator that leaves the broker list, and
// they would keep dialing a dead one that stays in it.
func (v *raftView) probe(stop <-chan struct{}) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	failures := map[int32]int{} // consecutive failed probes; this goroutine's own
	for {
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			failed = map[int32]bool{}
		)
		for _, id := range v.Voters() {
			if id == v.self {
				continue
			}
			p, ok := v.peer(id)
			if !ok {
				continue
			}
			// Peers are dialed at once, so one slow peer does not delay
			// the verdict on the others.
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", p.Kafka, time.Second)
				if err == nil {
					_ = c.Close()
				}
				mu.Lock()
				failed[id] = err != nil
				mu.Unlock()
			}()
		}
		wg.Wait()
		down := map[int32]bool{}
		for id, f := range failed {
			if !f {
				delete(failures, id)
				continue
			}
			failures[id]++
			if failures[id] >= probeDownAfter {
				down[id] = true
			}
		}
		for id := range failures {
			if _, probed := failed[id]; !probed {
				delete(failures, id) // no longer a voter
			}
		}
		v.down.Lock()
		v.down.m = down
		v.down.Unlock()
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

func (v *raftView) isDown(id int32) bool {
	v.down.RLock()
	defer v.down.RUnlock()
	return v.down.m[id]
}

func (v *raftView) peer(id int32) (cluster.Peer, bool) {
	if p, ok := v.nodes.Get(id); ok {
		return p, true
	}
	p, ok := v.static[id]
	return p, ok
}

func (v *raftView) Brokers() []protocol.BrokerAddr {
	var out []protocol.BrokerAddr
	for _, id := range v.Voters() {
		if v.isDown(id) && id != v.r.Leader() {
			continue
		}
		if p, ok := v.peer(id); ok {
			b := protocol.ParseBrokerAddr(id, p.Kafka)
			if v.rackOf != nil {
				b.Rack = v.rackOf(id)
			}
			out = append(out, b)
		}
	}
	return out
}

func (v *raftView) Leader() int32 { return v.r.Leader() }

// MoveLeadership implements protocol.LeaderMover: raft group g (0: the
// metadata group) is handed to id, and this node waits until it sees id
// lead it.
func (v *raftView) MoveLeadership(ctx context.Context, g uint8, id int32) error {
	return v.moveGroupLeadership(ctx, g, id)
}

// LeaderEpoch is the raft term: the one a leader stamps into what it
// appends (replication.Termed), and on a follower the term of the leader
// it follows.
func (v *raftView) LeaderEpoch() int32 { return v.r.Term() }

func (v *raftView) Serving() bool { return v.r.Ready() }

// StateIndex implements protocol.StateIndexer: a follower's forwarded
// change is answered once its state holds it.
func (v *raftView) StateIndex() uint64 { return v.r.StateIndex() }

func (v *raftView) Voters() []int32 {
	v.cache.Lock()
	defer v.cache.Unlock()
	if time.Since(v.cache.at) > 200*time.Millisecond || v.cache.voters == nil {
		if vs := v.r.Voters(); vs != nil {
			v.cache.voters, v.cache.at = vs, time.Now()
		}
	}
	return v.cache.voters
}

// InSync lists the voters whose Kafka port answers and whose heartbeats
// do not fail; on the leader, also caught up within replica.lag.time.max.ms
// (cluster.Raft.Lagging, which keeps every voter for that long into a
// term). A follower tracks no progress: it lists them by heartbeat only.
func (v *raftView) InSync() []int32 { return v.inSyncOf(v.r) }

// inSyncOf is InSync for raft group r (every group has the same voters).
func (v *raftView) inSyncOf(r *cluster.Raft) []int32 {
	voters := v.Voters()
	lagging := r.Lagging(voters)
	var out []int32
	for _, id := range voters {
		if !v.isDown(id) && !r.HeartbeatFailing(id) && !lagging[id] {
			out = append(out, id)
		}
	}
	return out
}

// DescribeQuorum implements protocol.QuorumDescriber.
func (v *raftView) DescribeQuorum() protocol.QuorumInfo {
	q := v.r.Quorum()
	info := protocol.QuorumInfo{LeaderID: q.LeaderID, LeaderEpoch: int32(min(q.Term, math.MaxInt32)), HighWatermark: int64(min(q.CommitIndex, math.MaxInt64)), Leader: q.Leader}
	for _, vp := range q.Voters {
		qv := protocol.QuorumVoter{ID: vp.ID, LogEndOffset: -1, LastFetch: vp.LastFetch, LastCaughtUp: vp.LastCaughtUp, Addr: protocol.BrokerAddr{ID: vp.ID, Port: -1}}
		if vp.LogEndIndex > 0 {
			qv.LogEndOffset = int64(min(vp.LogEndIndex, math.MaxInt64))
		}
		if p, ok := v.peer(vp.ID); ok {
			qv.Addr = protocol.ParseBrokerAddr(vp.ID, p.Kafka)
		}
		info.Voters = append(info.Voters, qv)
	}
	return info
}

func (v *raftView) ClusterID() string { return v.nodes.ClusterID() }
