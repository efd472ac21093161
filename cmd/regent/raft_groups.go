package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/actors/txn"
	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/protocol"
)

// partitionGroups are this node's partition raft groups (--raft-groups):
// each orders the writes of the partitions placed on it and has its own
// leader, so partition leadership spreads over the nodes. They share the
// node's raft port with the metadata group, and follow it
// (cluster.Raft.FollowMetadata): topics are created and deleted there.
type partitionGroups struct {
	// rafts[g-1] is group g; fixed once open (before the registry opens
	// and the node serves).
	rafts  []*cluster.Raft
	logger *slog.Logger
	// gate is held shared by a group applying a batch and exclusively by
	// a metadata snapshot installed on this node, which closes and
	// reopens every partition.
	gate sync.RWMutex
	// mu guards reg: nil until the registry is open. A group snapshot
	// installed before that restores its directory in place (nothing
	// reads it yet); after, the registry reloads the group's partitions
	// around the restore.
	mu  sync.Mutex
	reg *topics.Registry
	// forward reaches other nodes' Kafka handlers (setForwarder; nil
	// until the admin endpoint serves), under mu.
	forward protocol.Forwarder
	// post reaches a raft group's leader's admin endpoint (setForwarder;
	// nil until the admin endpoint serves), under mu.
	post groupPoster
	// coords are the groups' coordinators (nil until open), under mu: a
	// group's install reloads its coordinators with its partitions.
	coords *coordinatorShards
}

// groupDirs are partition group g's raft directory and state directory
// (its partitions' logs, which its snapshots capture).
func groupDirs(dataDir string, g uint8) (raftDir, stateDir string) {
	base := filepath.Join(dataDir, "groups", strconv.Itoa(int(g)))
	return filepath.Join(base, "raft"), filepath.Join(base, "state")
}

// open opens groups 1..n with meta's options (base: same peers, port and
// tuning), each following meta. On error none stays open.
func (pg *partitionGroups) open(n int, base cluster.RaftOptions, dataDir string, meta *cluster.Raft) error {
	for i := 1; i <= n; i++ {
		g := uint8(i)
		o := base
		o.Group = g
		o.Dir, o.StateDir = groupDirs(dataDir, g)
		o.OnInstall = pg.install(g)
		// No wait for the group's leader: an install before the registry
		// opens restores in place (install), and one after reloads the
		// group's partitions, so nothing restarts the node.
		o.StartWait = 0
		r, err := cluster.NewRaft(o)
		if err != nil {
			_ = pg.shutdown()
			return fmt.Errorf("open partition raft group %d: %w", g, err)
		}
		r.FollowMetadata(meta, &pg.gate)
		pg.rafts = append(pg.rafts, r)
	}
	return nil
}

// install is group g's cluster.RaftOptions.OnInstall.
func (pg *partitionGroups) install(g uint8) func(restore func() error) error {
	return func(restore func() error) error {
		pg.mu.Lock()
		defer pg.mu.Unlock()
		if pg.reg == nil {
			return restore()
		}
		reload := func() error { return pg.reg.ReloadGroup(g, restore) }
		if pg.coords != nil {
			return pg.coords.install(g, reload)
		}
		return reload()
	}
}

// openRegistry opens the topic registry with the groups placing new
// partitions; a group install waits for it.
func (pg *partitionGroups) openRegistry(o topics.Options, dataDir string) (*topics.Registry, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	o.Groups = &topics.PartitionGroups{
		Count: len(pg.rafts),
		Repl:  func(g uint8) replication.Replicator { return pg.rafts[g-1] },
		Dir: func(g uint8) string {
			_, state := groupDirs(dataDir, g)
			return state
		},
	}
	reg, err := topics.Open(o)
	if err == nil {
		pg.reg = reg
	}
	return reg, err
}

// holdApplies wraps the metadata group's install: no partition group
// applies while every partition is closed and reopened.
func (pg *partitionGroups) holdApplies(install func(restore func() error) error) func(restore func() error) error {
	return func(restore func() error) error {
		pg.gate.Lock()
		defer pg.gate.Unlock()
		return install(restore)
	}
}

func (pg *partitionGroups) start() {
	for _, r := range pg.rafts {
		r.Start()
	}
}

func (pg *partitionGroups) shutdown() error {
	if pg == nil {
		return nil
	}
	var errs []error
	for _, r := range pg.rafts {
		errs = append(errs, r.Shutdown())
	}
	return errors.Join(errs...)
}

// statuses reports every group (nil: none).
func (pg *partitionGroups) statuses() []cluster.GroupStatus {
	if pg == nil {
		return nil
	}
	out := make([]cluster.GroupStatus, 0, len(pg.rafts))
	for i, r := range pg.rafts {
		out = append(out, r.GroupStatus(uint8(i+1)))
	}
	return out
}

// group is partition group g (nil when g is not one).
func (pg *partitionGroups) group(g uint8) *cluster.Raft {
	if pg == nil || g == 0 || int(g) > len(pg.rafts) {
		return nil
	}
	return pg.rafts[g-1]
}

// firstRebalanceDelay is how long a node leads a group before it first
// checks that it is the group's preferred node (Kafka's controller runs
// its first automatic preferred-leader election 5 s after it starts).
const firstRebalanceDelay = 5 * time.Second

// rebalance runs until stop closes: each group this node leads and whose
// preferred node is another voter is handed to that node (Kafka's
// auto.leader.rebalance.enable) once that node has been in sync for
// firstRebalanceDelay, checked first firstRebalanceDelay after this node
// took the lead, then every interval. While the preferred node is out of
// sync (down, restarting, catching up) the check stays due, each tick,
// rather than waiting a whole interval: a node restarted just after the
// first check gets its groups back seconds after it caught up, not
// minutes. A hand-over that fails (the node fell behind again, an
// election in the way) is tried again the same way, not an interval later.
func (pg *partitionGroups) rebalance(view *raftView, self int32, interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	next := make([]time.Time, len(pg.rafts)) // zero: not led here
	// inSyncSince is when the group's preferred node was first seen in
	// sync without a break (zero: not in sync at the last check).
	inSyncSince := make([]time.Time, len(pg.rafts))
	moving := make([]bool, len(pg.rafts))
	failed := make([]bool, len(pg.rafts)) // the last hand-over failed
	var mu sync.Mutex                     // guards moving and failed
	for {
		select {
		case <-tick.C:
		case <-stop:
			return
		}
		now := time.Now()
		for i, r := range pg.rafts {
			g := uint8(i + 1)
			if !r.Ready() {
				next[i], inSyncSince[i] = time.Time{}, time.Time{}
				continue
			}
			if next[i].IsZero() {
				next[i] = now.Add(firstRebalanceDelay)
			}
			mu.Lock()
			if failed[i] {
				next[i], failed[i] = now, false
			}
			mu.Unlock()
			want := topics.PreferredLeader(g, view.Voters())
			if want < 0 || want == self {
				inSyncSince[i] = time.Time{}
				continue
			}
			switch {
			case !slices.Contains(view.Group(g).InSync(), want):
				inSyncSince[i] = time.Time{}
			case inSyncSince[i].IsZero():
				inSyncSince[i] = now
			}
			if now.Before(next[i]) || inSyncSince[i].IsZero() || now.Sub(inSyncSince[i]) < firstRebalanceDelay {
				continue // due again at the next tick
			}
			next[i], inSyncSince[i] = now.Add(interval), time.Time{}
			mu.Lock()
			busy := moving[i]
			moving[i] = true
			mu.Unlock()
			if busy {
				continue
			}
			go func() {
				defer func() {
					mu.Lock()
					moving[i] = false
					mu.Unlock()
				}()
				if err := r.TransferLeadershipTo(want); err != nil {
					mu.Lock()
					failed[i] = true
					mu.Unlock()
					pg.logger.Info("hand a partition raft group to its preferred node", "raft_group", g, "to", want, "err", err)
					return
				}
				pg.logger.Info("partition raft group handed to its preferred node", "raft_group", g, "to", want)
			}()
		}
	}
}

// groupView is protocol's view of one partition group.
type groupView struct {
	v *raftView
	r *cluster.Raft
}

func (g groupView) Leader() int32      { return g.r.Leader() }
func (g groupView) LeaderEpoch() int32 { return g.r.Term() }
func (g groupView) Serving() bool      { return g.r.Ready() }
func (g groupView) InSync() []int32    { return g.v.inSyncOf(g.r) }

// Group implements protocol.ClusterView: partition group g, or the
// metadata group (0, or a group this node does not run).
func (v *raftView) Group(g uint8) protocol.GroupView {
	if r := v.groups.group(g); r != nil {
		return groupView{v: v, r: r}
	}
	return v
}

// moveGroupLeadership hands group g (0: the metadata group) to node id
// and waits until this node sees id lead it.
func (v *raftView) moveGroupLeadership(ctx context.Context, g uint8, id int32) error {
	r := v.r
	if pr := v.groups.group(g); pr != nil {
		r = pr
	}
	switch leader := r.Leader(); {
	case leader == id:
		return nil
	case r.Ready() || g == 0:
		// The metadata group's ElectLeaders was forwarded to its leader.
		if err := r.TransferLeadershipTo(id); err != nil {
			return err
		}
	case leader < 0 || v.askTransfer == nil:
		return fmt.Errorf("raft group %d has no leader this node can reach", g)
	default:
		if err := v.askTransfer(ctx, leader, g, id); err != nil {
			return err
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for r.Leader() != id {
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d did not take over raft group %d: %w", id, g, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// markerForwardTimeout bounds one marker sent to another node; the
// coordinator retries a marker that timed out.
const markerForwardTimeout = 30 * time.Second

// setForwarder hands the groups the way to other nodes' Kafka handlers
// (the admin endpoint's forwarding), for transaction markers.
func (pg *partitionGroups) setForwarder(f protocol.Forwarder, post groupPoster) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.forward, pg.post = f, post
}

func (pg *partitionGroups) poster() groupPoster {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.post
}

func (pg *partitionGroups) forwarder() protocol.Forwarder {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.forward
}

// markerTarget is what the transaction coordinator writes partition
// (topic, index)'s markers through: the partition itself when its raft
// group is the metadata group or led here, else a WriteTxnMarkers request
// to the group's leader (groupMarkers).
func (pg *partitionGroups) markerTarget(reg *topics.Registry, topic string, index int32) txn.TxnPartition {
	t := reg.Get(topic)
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil // not a nil *Partition: the interface would be non-nil
	}
	p := t.Partitions[index]
	r := pg.group(t.PartitionGroup(index))
	if r == nil {
		return p
	}
	return groupMarkers{pg: pg, p: p, r: r, topic: topic, index: index}
}

// groupMarkers writes a partition group's markers on the group's leader.
type groupMarkers struct {
	pg    *partitionGroups
	p     *partition.Partition
	r     *cluster.Raft
	topic string
	index int32
}

// WriteTxnMarker implements txn.TxnPartition: here when this node leads
// the group, else on its leader, as Kafka's coordinator sends
// WriteTxnMarkers to each partition's leader. Every failure to reach the
// leader is retriable (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT): the
// coordinator sends the marker again, to the leader of then.
func (m groupMarkers) WriteTxnMarker(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, reply func(err error)) {
	if m.r.Ready() {
		m.p.WriteTxnMarker(producerID, producerEpoch, commit, coordinatorEpoch, reply)
		return
	}
	leader, forward := m.r.Leader(), m.pg.forwarder()
	if leader < 0 || forward == nil {
		reply(kerr.NotLeaderForPartition)
		return
	}
	go func() { reply(m.send(forward, leader, producerID, producerEpoch, commit, coordinatorEpoch)) }()
}

// markersVersion is the WriteTxnMarkers version nodes send each other.
const markersVersion = 1

func (m groupMarkers) send(forward protocol.Forwarder, leader int32, producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(markersVersion)
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = producerID, producerEpoch, commit, coordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = m.topic, []int32{m.index}
	mk.Topics = append(mk.Topics, mt)
	req.Markers = append(req.Markers, mk)
	ctx, cancel := context.WithTimeout(context.Background(), markerForwardTimeout)
	defer cancel()
	body, _, err := forward(ctx, leader, protocol.ForwardedRequest{Key: req.Key(), Version: markersVersion, ClientID: "regent-txn-coordinator", Node: true, Body: req.AppendTo(nil)})
	if err != nil {
		m.pg.logger.Info("send a transaction marker to the partition's leader", "topic", m.topic, "partition", m.index, "leader", leader, "err", err)
		return kerr.RequestTimedOut
	}
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.SetVersion(markersVersion)
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("node %d's WriteTxnMarkers answer: %w", leader, err)
	}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == m.topic && rp.Partition == m.index {
					return kerr.ErrorForCode(rp.ErrorCode)
				}
			}
		}
	}
	return fmt.Errorf("node %d's WriteTxnMarkers answer names no %s-%d", leader, m.topic, m.index)
}

// serveGroupLeadership adds POST /cluster/groups/{g}/leader to the admin
// endpoint: the node leading partition group g hands it to the node the
// body names ({"to": id}) and answers once raft has (ElectLeaders asked on
// another node reaches the group's leader this way; only nodes may ask,
// as for membership changes).
func (a *adminServer) serveGroupLeadership(pg *partitionGroups) {
	type transfer struct {
		To int32 `json:"to"`
	}
	handleGroupPost(a, "leader", func(w http.ResponseWriter, _ *http.Request, g uint8, body transfer, err error) {
		gr := pg.group(g)
		if err != nil || gr == nil || body.To <= 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("want a partition raft group of this node (1-%d) in the path and {\"to\": NODE}", len(pg.rafts))})
			return
		}
		if !gr.Ready() {
			writeJSON(w, http.StatusConflict, map[string]any{"error": "this node does not lead the group", "leader": gr.Leader()})
			return
		}
		if err := gr.TransferLeadershipTo(body.To); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"leader": body.To})
	})
}

// handleGroupPost adds POST /cluster/groups/{g}/{what} to the admin
// endpoint, for nodes only (signed as membership changes are, the body
// bounded): serve gets the raft group in the path and the body decoded as
// T, or the error that kept either from parsing.
func handleGroupPost[T any](a *adminServer, what string, serve func(w http.ResponseWriter, r *http.Request, g uint8, body T, err error)) {
	mux, ok := a.srv.Handler.(*http.ServeMux)
	if !ok {
		return
	}
	mux.HandleFunc("POST /cluster/groups/{g}/"+what, a.auth.guard(maxMembershipBytes, a.logger, func(w http.ResponseWriter, r *http.Request) {
		g, err := strconv.ParseUint(r.PathValue("g"), 10, 8)
		var body T
		if err == nil {
			err = json.NewDecoder(r.Body).Decode(&body) // bounded by guard
		}
		serve(w, r, uint8(g), body, err)
	}))
}

// askTransfer asks node leader's admin endpoint to hand partition group g
// to node to (serveGroupLeadership).
func (a *adminServer) askTransfer(ctx context.Context, leader int32, g uint8, to int32) error {
	return a.postGroup(ctx, leader, g, "leader", map[string]int32{"to": to})
}

// postGroup sends body to node leader's admin endpoint, raft group g's
// leader: POST /cluster/groups/{g}/{what}, signed as the cluster's nodes
// sign; any answer but 200 is an error.
func (a *adminServer) postGroup(ctx context.Context, leader int32, g uint8, what string, body any) error {
	node, ok := a.nodes.Get(leader)
	if !ok || node.Admin == "" {
		return fmt.Errorf("node %d, raft group %d's leader, has no known admin endpoint", leader, g)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s%s/cluster/groups/%d/%s", a.scheme, node.Admin, g, what), bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	a.auth.sign(req, raw)
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s to node %d (raft group %d): %w", what, leader, g, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %d, raft group %d's %s: %s: %s", leader, g, what, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// groupVoterChange is the body of POST /cluster/groups/{g}/voters.
type groupVoterChange struct {
	Add  bool         `json:"add"`
	Peer cluster.Peer `json:"peer"`
}

// serveGroupVoters adds POST /cluster/groups/{g}/voters: the node leading
// partition group g adds or removes a voter (a membership change made on
// the metadata group's leader reaches each group's leader this way).
func (a *adminServer) serveGroupVoters(pg *partitionGroups) {
	handleGroupPost(a, "voters", func(w http.ResponseWriter, _ *http.Request, g uint8, body groupVoterChange, err error) {
		gr := pg.group(g)
		if err != nil || gr == nil || body.Peer.ID <= 0 || (body.Add && body.Peer.Raft == "") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("want a partition raft group of this node (1-%d) in the path and {\"add\": BOOL, \"peer\": {\"id\": N, \"raft\": \"host:port\", ...}}", len(pg.rafts))})
			return
		}
		if !gr.Ready() {
			writeJSON(w, http.StatusConflict, map[string]any{"error": "this node does not lead the group", "leader": gr.Leader()})
			return
		}
		if body.Add {
			err = gr.AddVoter(body.Peer)
		} else {
			err = gr.RemoveVoter(body.Peer.ID)
		}
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, gr.GroupStatus(g))
	})
}

// groupVotersWait bounds a membership change across the partition groups.
const groupVotersWait = 60 * time.Second

// changeGroupVoters adds (or removes) voter p in every partition group,
// through each group's leader, retrying while a group elects; nil without
// groups.
func (a *adminServer) changeGroupVoters(add bool, p cluster.Peer) error {
	if a.groups == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupVotersWait)
	defer cancel()
	for i, r := range a.groups.rafts {
		g := uint8(i + 1)
		if err := a.changeGroupVoter(ctx, g, r, add, p); err != nil {
			return fmt.Errorf("partition raft group %d: %w", g, err)
		}
	}
	return nil
}

func (a *adminServer) changeGroupVoter(ctx context.Context, g uint8, r *cluster.Raft, add bool, p cluster.Peer) error {
	backoff := 50 * time.Millisecond
	for {
		var err error
		switch leader := r.Leader(); {
		case r.Ready() && add:
			err = r.AddVoter(p)
		case r.Ready():
			err = r.RemoveVoter(p.ID)
		case leader > 0:
			err = a.askGroupVoter(ctx, leader, g, groupVoterChange{Add: add, Peer: p})
		default:
			err = errors.New("no leader")
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// askGroupVoter sends a membership change to node leader, partition group
// g's leader (serveGroupVoters).
func (a *adminServer) askGroupVoter(ctx context.Context, leader int32, g uint8, change groupVoterChange) error {
	return a.postGroup(ctx, leader, g, "voters", change)
}
