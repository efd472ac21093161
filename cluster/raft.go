package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/regent-broker/regent/actors/replication"
)

// Peer is one cluster node's identity and addresses.
type Peer struct {
	ID    int32  `json:"id"`
	Kafka string `json:"kafka"` // advertised Kafka listener host:port
	Raft  string `json:"raft"`  // raft transport host:port
	Admin string `json:"admin"` // HTTP admin host:port ("" if none)
}

// RaftOptions configures a cluster node's replicator.
type RaftOptions struct {
	Self Peer
	// Dir holds raft's own files: the log and stable store (wal/, see
	// openLogStore) and snapshots.
	Dir string
	// StateDir is the node's broker state (topics, partitions, groups,
	// transactions). It persists across restarts: at start NewRaft makes it
	// equal to the latest snapshot (re-linking and truncating files, no
	// copy) and raft applies the entries after it; with no snapshot yet it
	// is emptied, since raft then replays its whole log.
	StateDir string
	// Peers are the initial voters; the nodes bootstrap the cluster with
	// them when their raft state is empty (unless Join).
	Peers []Peer
	// Join makes a node with empty raft state wait to be added as a voter
	// (regent cluster add-voter) instead of bootstrapping.
	Join   bool
	Logger *slog.Logger
	// OnInstall is called, on the FSM goroutine, when the leader installs
	// a snapshot on this running node (its files already received): it
	// must close every state object with files in StateDir, call restore
	// (which makes StateDir equal to the snapshot), and reopen them in
	// place, then return nil. Nothing is applied meanwhile. An error (from
	// restore or a reopen) means the state objects are not serving the
	// snapshot's state: the node falls back to OnRuntimeRestore. Nil: the
	// node always restarts.
	OnInstall func(restore func() error) error
	// OnRuntimeRestore is called when a snapshot installed on this running
	// node could not be loaded in place (no OnInstall, or it failed): the
	// node must restart, loading the snapshot at start. It is not expected
	// to return; if nil, or if it returns, the install fails.
	OnRuntimeRestore func()
	// OnApplyFailure is called (on its own goroutine) when a committed
	// command failed on this node's storage (replication.FailedLocally):
	// the node has stopped applying and must stop; restarted, it applies
	// the entry again from its last snapshot. Nil: the node stays up, not
	// applying, until someone restarts it.
	OnApplyFailure func(err error)
	// Observer follows applies (nil: untraced).
	Observer ApplyObserver
	// Snapshot tuning; zero values take the defaults below.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// SnapshotBytes also triggers a snapshot once this many entry bytes
	// were applied since the last one, bounding the log replayed at start
	// in bytes (default 256 MiB).
	SnapshotBytes int64
	// StartWait bounds how long NewRaft waits, on a node with no raft
	// state, for the leader's first entries or snapshot before handing the
	// state directory over (see awaitFirstContact). Zero: no wait, for
	// callers that start a new cluster's nodes one after another in one
	// process (the first could not hear from a leader before the others
	// exist); the broker sets it. Stop, when closed, ends the wait early.
	StartWait time.Duration
	Stop      <-chan struct{}
	// TLS and DialTLS, both set, put the raft transport on mutual TLS:
	// TLS must require and verify peer certificates, DialTLS presents
	// this node's certificate and trusts the cluster CA (tls_transport.go).
	TLS, DialTLS *tls.Config
	// ReplicaLagMax is Kafka's replica.lag.time.max.ms: the leader counts
	// a voter it has not seen caught up for longer out of the ISR
	// (Lagging). Zero: DefaultReplicaLagMax.
	ReplicaLagMax time.Duration
	// LinkSecrets, without TLS, make every raft-port connection (raft
	// RPCs, snapshot-file fetches) open with a mutual challenge-response
	// (secret_stream.go): this node proves the first, and a peer must
	// prove one of them, or is refused. Nodes share the first, or accept
	// each other's while it is being rotated; none leaves the port open.
	LinkSecrets [][]byte
	// Port, when set, is the node's raft port shared by its raft groups
	// (OpenRaftPort): this group's RPCs and snapshot fetches go through
	// it, as group Group, instead of a listener of NewRaft's own on
	// Self.Raft, which must be the port's advertised address. TLS,
	// DialTLS and LinkSecrets are then the port's (these are not used).
	// Shutdown closes only the group; the caller closes the port after
	// every group's Shutdown.
	Port *RaftPort
	// Group is this raft group's number on Port. Group 0 is the metadata
	// group: it speaks what a node without a Port does on its own
	// listener, so the two interoperate.
	Group uint8
	// CacheShare, above 1, is how many raft groups of the node share the
	// leader's in-memory log cache bytes: each gets that share (the
	// groups split the node's traffic between them). 0 or 1: the whole.
	CacheShare int
}

// ApplyObserver traces commands applied on this node. StartApply is
// called only for commands proposed with a traceparent (see WithTrace);
// the returned func ends the span.
type ApplyObserver interface {
	StartApply(traceparent, key, kind string, nodeID int32) func()
}

// maxEntryBytes bounds one coalesced raft entry; maxInflightEntries bounds
// how many are being committed at once. While the pipeline is full,
// proposals queue and leave together in the next entry.
const (
	maxEntryBytes      = 1 << 20
	maxInflightEntries = 64
)

// Raft is the cluster replicator: proposals on the leader are coalesced
// into raft entries; every node applies committed entries in log order by
// handing each command to the applier registered for its key.
type Raft struct {
	o     RaftOptions
	log   *slog.Logger
	raft  *raft.Raft
	trans *raft.NetworkTransport
	store logStore
	snaps *snapStore
	fsm   *fsm
	stats pipeStats
	// progress is the leader's record of its voters' replication
	// (quorum.go), fed by the transport raft is given.
	progress *progressTracker

	// appliers is written by Register/Unregister (any goroutine) and read
	// by Propose and the FSM goroutine.
	appliers struct {
		sync.RWMutex
		m map[string]Applier
	}

	// ready is true while this node is the leader and has applied every
	// entry committed before its term: only then are proposals taken.
	ready atomic.Bool

	// queue holds encoded proposals waiting for the batcher.
	queue struct {
		sync.Mutex
		pending []*proposal
		bytes   int
		closed  bool // set at shutdown: later proposals fail at once
	}
	wake  chan struct{}
	slots chan struct{}
	// cb answers the proposals Propose refuses, off the proposer's
	// goroutine (never inline: replication's contract).
	cb replication.Callbacks
	// batcherDone is closed when the batcher exits (nothing more comes
	// into inflight); raftDown when raft has shut down (futures it has not
	// answered by then it never will). Both made by Start.
	batcherDone, raftDown chan struct{}
	inflight              chan *pendingEntry

	leaderHooks []func(leader bool) // set before Start; called on the leadership goroutine
	// settledHooks: set before Start; called on the leadership goroutine
	// once every earlier entry is applied and before proposals are taken.
	settledHooks []func()

	// health tracks followers that missed heartbeats (the leader's view,
	// for ISR); written by the observer goroutine.
	health struct {
		sync.Mutex
		failed map[int32]bool
	}

	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
	notify  chan bool
	obs     *raft.Observer
	obsCh   chan raft.Observation
	started atomic.Bool
}

type proposal struct {
	at   time.Time // when Propose queued it (pipeStats)
	ec   entryCommand
	done func(any, error)
}

// pendingEntry is one raft entry being committed. answered is closed by
// the entry's waiter goroutine once f has answered (err is then set): the
// completer can stop waiting for an answer that raft will never give (a
// future left in raft's apply queue when it shut down).
type pendingEntry struct {
	f        raft.ApplyFuture
	at       time.Time // when it went to raft.Apply (pipeStats)
	props    []*proposal
	err      error
	answered chan struct{}
}

// await waits for f's answer, on the entry's own goroutine. After a
// shutdown raft may never answer: the goroutine then stays blocked (at
// most maxInflightEntries of them per Raft).
func (e *pendingEntry) await() {
	e.err = e.f.Error()
	close(e.answered)
}

// NewRaft opens the raft stores, restores the latest snapshot into
// StateDir (or empties it if there is none) and joins (or bootstraps) the
// cluster; a node with no raft state first waits for the leader's first
// entries or snapshot (awaitFirstContact). The caller then opens its state
// from StateDir, registers appliers, and calls Start: committed entries
// are applied only after Start.
func NewRaft(o RaftOptions) (*Raft, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Self.ID <= 0 {
		return nil, fmt.Errorf("cluster: node id must be positive, got %d", o.Self.ID)
	}
	if o.SnapshotThreshold == 0 {
		o.SnapshotThreshold = 8192
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = 2 * time.Minute
	}
	if o.TrailingLogs == 0 {
		// Entries are coalesced proposals of up to maxEntryBytes (about
		// 76 KiB each at 1 KiB records, measured): 10240 of them kept
		// about 1 GB of raft log after every snapshot with 2 GB
		// produced. A follower further behind gets a snapshot, which
		// sends only the segment files it lacks.
		o.TrailingLogs = 1024
	}
	if o.SnapshotBytes == 0 {
		o.SnapshotBytes = 256 << 20
	}
	r := &Raft{
		o:        o,
		log:      o.Logger.With("component", "raft"),
		wake:     make(chan struct{}, 1),
		slots:    make(chan struct{}, maxInflightEntries),
		inflight: make(chan *pendingEntry, maxInflightEntries),
		stop:     make(chan struct{}),
		notify:   make(chan bool, 16),
	}
	if o.Port != nil {
		// Several groups log through one logger.
		r.log = r.log.With("raft_group", o.Group)
	}
	r.appliers.m = map[string]Applier{}
	r.health.failed = map[int32]bool{}
	r.progress = newProgressTracker(time.Now)
	r.fsm = &fsm{r: r, readyCh: make(chan struct{})}

	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create raft dir: %w", err)
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, Output: &slogWriter{log: r.log}, JSONFormat: true})
	snaps, err := newSnapStore(filepath.Join(o.Dir, "snapshots"), 2, r.log)
	if err != nil {
		return nil, fmt.Errorf("open raft snapshots: %w", err)
	}
	r.snaps = snaps
	// The state directory persists; raft restores the latest snapshot into
	// it (fsm.Restore) and applies only the entries after it. With no
	// snapshot raft replays its log from the start: start the state empty
	// so nothing is applied twice.
	if metas, err := snaps.List(); err != nil {
		return nil, err
	} else if len(metas) == 0 {
		if err := os.RemoveAll(o.StateDir); err != nil {
			return nil, fmt.Errorf("clear state dir: %w", err)
		}
	}
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}

	store, err := openLogStore(o.Dir, &r.stats.wal)
	if err != nil {
		return nil, fmt.Errorf("open raft log: %w", err)
	}
	r.store = store
	adv, err := net.ResolveTCPAddr("tcp", o.Self.Raft)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("raft address %q: %w", o.Self.Raft, err)
	}
	// The raft port also serves snapshot files to followers (snapmux.go).
	var trans *raft.NetworkTransport
	if o.Port != nil {
		if port := o.Port.Addr(); port != adv.String() {
			err = fmt.Errorf("raft group %d: address %s is not the shared port's advertised %s", o.Group, o.Self.Raft, port)
		} else {
			trans, err = o.Port.transport(o.Group, o.Self.Raft, o.StateDir, snaps, hlog)
		}
	} else if trans, err = newRaftTransport(o, adv, snaps, r.log, hlog); err != nil {
		err = fmt.Errorf("raft listen %s: %w", o.Self.Raft, err)
	}
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	r.trans = trans

	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(strconv.Itoa(int(o.Self.ID)))
	cfg.Logger = hlog
	cfg.NotifyCh = r.notify
	tuneRaftConfig(cfg)
	cfg.SnapshotThreshold = o.SnapshotThreshold
	cfg.SnapshotInterval = o.SnapshotInterval
	cfg.TrailingLogs = o.TrailingLogs
	cfg.HeartbeatTimeout = 1000 * time.Millisecond
	cfg.ElectionTimeout = 1000 * time.Millisecond
	cfg.LeaderLeaseTimeout = 500 * time.Millisecond
	cfg.CommitTimeout = commitTimeout

	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		_ = trans.Close()
		_ = store.Close()
		return nil, fmt.Errorf("inspect raft state: %w", err)
	}
	// The cache serves replication from memory: without it the leader
	// reads (and decodes) every entry back from the wal to send it.
	// Followers in step lag by at most the entries in flight
	// (maxInflightEntries); with entries of up to maxEntryBytes, 4096
	// cached entries held most of a node's 700 MB RSS, and 256 still held
	// 600-750 MB in the cluster bench until the cache was bounded by bytes.
	logs := newLogCache(store, logCacheEntries, logCacheBytes/int64(max(1, o.CacheShare)))
	ra, err := raft.NewRaft(cfg, r.fsm, logs, store, snaps, &trackingTransport{NetworkTransport: trans, progress: r.progress})
	if err != nil {
		_ = trans.Close()
		_ = store.Close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	r.raft = ra
	r.progress.setLastIndex(ra.LastIndex)
	if !existing && !o.Join {
		var servers []raft.Server
		for _, p := range o.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(p.ID), Address: raft.ServerAddress(p.Raft)})
		}
		if len(servers) == 0 {
			servers = []raft.Server{{Suffrage: raft.Voter, ID: serverID(o.Self.ID), Address: raft.ServerAddress(o.Self.Raft)}}
		}
		if err := ra.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			_ = ra.Shutdown().Error()
			_ = store.Close()
			return nil, fmt.Errorf("bootstrap cluster: %w", err)
		}
		r.log.Info("bootstrapped cluster", "voters", len(servers))
	}
	if !existing && o.StartWait > 0 {
		r.awaitFirstContact()
	}
	// From here the caller opens StateDir: later installs go through
	// OnInstall, or restart the node.
	r.fsm.markOpened()
	r.obsCh = make(chan raft.Observation, 64)
	r.obs = raft.NewObserver(r.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation, raft.PeerObservation:
			return true
		}
		return false
	})
	ra.RegisterObserver(r.obs)
	return r, nil
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func parseServerID(id raft.ServerID) int32 {
	n, err := strconv.Atoi(string(id))
	if err != nil {
		return -1
	}
	return int32(n)
}

// OnLeadership registers hook, called with true once this node is the
// leader and caught up (proposals are taken), and with false when it
// stops being one. Hooks run one at a time on the leadership goroutine;
// register them before Start.
func (r *Raft) OnLeadership(hook func(leader bool)) { r.leaderHooks = append(r.leaderHooks, hook) }

// OnLeaderSettled adds a hook called when this node, newly leader, has
// applied every earlier entry and takes no proposal yet: what it reads of
// the state then was made by earlier leaders only, not by requests to this
// one (OnLeadership's hooks run after proposals are taken). It must not
// propose. Call before Start.
func (r *Raft) OnLeaderSettled(hook func()) { r.settledHooks = append(r.settledHooks, hook) }

// Start begins applying committed entries and taking proposals.
func (r *Raft) Start() {
	if !r.started.CompareAndSwap(false, true) {
		return
	}
	close(r.fsm.readyCh)
	r.batcherDone, r.raftDown = make(chan struct{}), make(chan struct{})
	r.wg.Add(4)
	go r.batcher()
	go r.completer()
	go r.leadership()
	go r.observe()
}

// Register implements Replicator.
func (r *Raft) Register(key string, a Applier) {
	r.appliers.Lock()
	r.appliers.m[key] = a
	r.appliers.Unlock()
}

// Unregister implements Replicator.
func (r *Raft) Unregister(key string) {
	r.appliers.Lock()
	delete(r.appliers.m, key)
	r.appliers.Unlock()
}

func (r *Raft) applier(key string) Applier {
	r.appliers.RLock()
	defer r.appliers.RUnlock()
	return r.appliers.m[key]
}

// CommandFreeAtDone implements replication.FreeAtDone. Propose reads only
// cmd's size; the batcher encodes a taken proposal into its entry before
// the entry can be answered, and failQueued answers proposals it took
// from the queue without encoding them, on the batcher goroutine itself.
// So done never runs while anything here still reads the command.
func (r *Raft) CommandFreeAtDone() {}

// Propose implements Replicator. done is called from a replicator
// goroutine, never the proposer's: once the command is committed and
// applied on this node; with an error wrapping ErrNotLeader when this node
// is not the leader or is shutting down before the command reached raft
// (not applied); with an error wrapping ErrOutcomeUnknown when raft took
// the entry and then lost leadership or shut down (see complete).
func (r *Raft) Propose(key string, cmd Command, done func(any, error)) {
	if !r.ready.Load() {
		r.cb.Add(done, nil, r.notLeaderErr())
		return
	}
	inner, tp := unwrapTrace(cmd)
	enc, ok := inner.(Encodable)
	if !ok {
		r.cb.Add(done, nil, fmt.Errorf("propose to %q: %w: %T", key, ErrNotEncodable, inner))
		return
	}
	// Encoded by the batcher, straight into the entry.
	size := 64
	if s, ok := enc.(CommandSizer); ok {
		size = s.CommandSize()
	}
	p := &proposal{at: time.Now(), ec: entryCommand{key: key, kind: enc.CommandKind(), trace: tp, cmd: enc, size: size}, done: done}
	r.queue.Lock()
	if r.queue.closed {
		r.queue.Unlock()
		r.cb.Add(done, nil, fmt.Errorf("%w: node shutting down", ErrNotLeader))
		return
	}
	r.queue.pending = append(r.queue.pending, p)
	r.queue.bytes += p.ec.wireSize()
	r.queue.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Raft) notLeaderErr() error {
	_, id := r.raft.LeaderWithID()
	if id == "" {
		return fmt.Errorf("%w: no leader elected yet", ErrNotLeader)
	}
	return fmt.Errorf("%w: node %s leads", ErrNotLeader, id)
}

// take removes up to maxEntryBytes of queued proposals.
func (r *Raft) take() []*proposal {
	r.queue.Lock()
	defer r.queue.Unlock()
	if len(r.queue.pending) == 0 {
		return nil
	}
	n, size := 0, 0
	for n < len(r.queue.pending) {
		p := r.queue.pending[n]
		sz := p.ec.wireSize()
		if n > 0 && size+sz > maxEntryBytes {
			break
		}
		size += sz
		n++
	}
	out := make([]*proposal, n)
	copy(out, r.queue.pending[:n])
	rest := copy(r.queue.pending, r.queue.pending[n:])
	for i := rest; i < len(r.queue.pending); i++ {
		r.queue.pending[i] = nil
	}
	r.queue.pending = r.queue.pending[:rest]
	r.queue.bytes -= size
	return out
}

// batcher turns queued proposals into raft entries, at most
// maxInflightEntries being committed at once.
func (r *Raft) batcher() {
	defer r.wg.Done()
	defer close(r.batcherDone)
	for {
		select {
		case <-r.wake:
		case <-r.stop:
			r.failQueued(fmt.Errorf("%w: node shutting down", ErrNotLeader))
			return
		}
		for {
			// Stop wins over a free slot: nothing goes to raft once
			// Shutdown began (a select would pick either).
			select {
			case <-r.stop:
				r.failQueued(fmt.Errorf("%w: node shutting down", ErrNotLeader))
				return
			default:
			}
			select {
			case r.slots <- struct{}{}:
			case <-r.stop:
				r.failQueued(fmt.Errorf("%w: node shutting down", ErrNotLeader))
				return
			}
			props := r.take()
			if len(props) == 0 {
				<-r.slots
				break
			}
			cmds := make([]entryCommand, len(props))
			for i, p := range props {
				cmds[i] = p.ec
			}
			after, withAfter := r.fsm.metadataIndex()
			data := encodeEntryAfter(cmds, withAfter, after)
			now := time.Now()
			r.stats.proposed(props, len(data), now)
			e := &pendingEntry{f: r.raft.Apply(data, 0), at: now, props: props, answered: make(chan struct{})}
			go e.await()
			r.inflight <- e
		}
	}
}

// failQueued answers the proposals that never reached raft (definite
// failures: err wraps ErrNotLeader) and refuses later ones; on the batcher
// goroutine, at shutdown.
func (r *Raft) failQueued(err error) {
	r.queue.Lock()
	r.queue.closed = true
	r.queue.Unlock()
	for {
		props := r.take()
		if len(props) == 0 {
			return
		}
		for _, p := range props {
			p.done(nil, err)
		}
	}
}

// completer answers proposals in commit order, until the batcher has
// exited and every entry it handed over is answered.
func (r *Raft) completer() {
	defer r.wg.Done()
	for {
		select {
		case e := <-r.inflight:
			r.complete(e)
		case <-r.batcherDone:
			for {
				select {
				case e := <-r.inflight:
					r.complete(e)
				default:
					return
				}
			}
		}
	}
}

// complete answers an entry's proposals, on the completer goroutine.
func (r *Raft) complete(e *pendingEntry) {
	var err error
	select {
	case <-e.answered:
		err = e.err
	case <-r.raftDown:
		select {
		case <-e.answered:
			err = e.err
		default:
			// raft shut down without answering (the entry sat in its
			// apply queue, or its answer is still on the way here).
			err = errors.New("raft shut down with the entry in flight")
		}
	}
	<-r.slots
	r.stats.answeredNs.Add(int64(time.Since(e.at)))
	if err != nil {
		err = applyError(err)
		for _, p := range e.props {
			p.done(nil, err)
		}
		return
	}
	results, ok := e.f.Response().([]any)
	for i, p := range e.props {
		if !ok || i >= len(results) {
			// Committed, but this node's FSM did not apply it (it is
			// restarting to load a snapshot, or the entry did not
			// decode): the result is not known here.
			p.done(nil, fmt.Errorf("%w: entry committed but not applied on this node", ErrOutcomeUnknown))
			continue
		}
		if lf := replication.FailedLocally(results[i]); lf != nil {
			// Committed, so the other nodes apply it, but this node's
			// storage refused it (fsm.stopApplying stops the node): the
			// command's failure is this node's, not the outcome, so the
			// client is not told it failed (a retry could duplicate it).
			p.done(nil, fmt.Errorf("%w: entry committed but this node's storage failed applying it: %v", ErrOutcomeUnknown, lf))
			continue
		}
		p.done(results[i], nil)
	}
}

// applyError maps a raft Apply future's error to the contract. raft
// refuses an entry it has not appended with ErrNotLeader (this node was not
// leading when raft took it) or ErrLeadershipTransferInProgress: a definite
// failure. ErrLeadershipLost comes after the entry was appended and may
// still be committed by the next leader; ErrRaftShutdown may come before
// or after the append; a log store error leaves the entry's fate to the
// next leader too: all of these are unknown outcomes.
func applyError(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}

// leadership follows raft's leader changes: a new leader first waits for
// a barrier (every earlier entry applied) before it takes proposals.
func (r *Raft) leadership() {
	defer r.wg.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.notify:
		case <-tick.C:
		case <-r.stop:
			if r.ready.Swap(false) {
				r.runHooks(false)
			}
			return
		}
		leader := r.raft.State() == raft.Leader
		switch {
		case leader && !r.ready.Load():
			if err := r.raft.Barrier(10 * time.Second).Error(); err != nil {
				r.log.Warn("leader barrier failed", "err", err)
				continue
			}
			if r.raft.State() != raft.Leader {
				continue
			}
			for _, h := range r.settledHooks {
				h()
			}
			r.ready.Store(true)
			r.log.Info("leading the cluster", "node", r.o.Self.ID, "term", r.raft.Stats()["term"])
			r.runHooks(true)
		case !leader && r.ready.Load():
			r.ready.Store(false)
			r.log.Info("no longer leading the cluster", "node", r.o.Self.ID)
			r.runHooks(false)
		}
	}
}

func (r *Raft) runHooks(leader bool) {
	for _, h := range r.leaderHooks {
		h(leader)
	}
}

// observe tracks follower heartbeats for the ISR.
func (r *Raft) observe() {
	defer r.wg.Done()
	for {
		select {
		case o := <-r.obsCh:
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				r.health.Lock()
				r.health.failed[parseServerID(d.PeerID)] = true
				r.health.Unlock()
			case raft.ResumedHeartbeatObservation:
				r.health.Lock()
				delete(r.health.failed, parseServerID(d.PeerID))
				r.health.Unlock()
			case raft.LeaderObservation:
				// A new term resets the view: the new leader learns its
				// followers' health from its own heartbeats.
				r.health.Lock()
				r.health.failed = map[int32]bool{}
				r.health.Unlock()
				select {
				case r.notify <- r.raft.State() == raft.Leader:
				default:
				}
			}
		case <-r.stop:
			return
		}
	}
}

// Ready reports whether this node is the caught-up leader.
func (r *Raft) Ready() bool { return r.ready.Load() }

// Leader returns the current leader's node id, or -1 when none is known.
func (r *Raft) Leader() int32 {
	_, id := r.raft.LeaderWithID()
	if id == "" {
		return -1
	}
	return parseServerID(id)
}

// Term is raft's current term as a Kafka leader epoch (clamped to int32).
func (r *Raft) Term() int32 {
	t := r.raft.CurrentTerm()
	if t > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(t)
}

// Voters lists the voters of the latest configuration.
func (r *Raft) Voters() []int32 {
	f := r.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []int32
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out = append(out, parseServerID(s.ID))
		}
	}
	return out
}

// InSync lists the voters the leader hears from (on a follower: all
// voters, as far as it knows).
func (r *Raft) InSync() []int32 {
	voters := r.Voters()
	r.health.Lock()
	defer r.health.Unlock()
	out := voters[:0:0]
	for _, v := range voters {
		if !r.health.failed[v] {
			out = append(out, v)
		}
	}
	return out
}

// HeartbeatFailing reports whether the leader's heartbeats to voter id
// are failing (always false on a follower).
func (r *Raft) HeartbeatFailing(id int32) bool {
	r.health.Lock()
	defer r.health.Unlock()
	return r.health.failed[id]
}

// Status is a node's view of the cluster (regent cluster status).
type Status struct {
	NodeID       int32  `json:"node_id"`
	LeaderID     int32  `json:"leader_id"`
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// StateIndex is what the state directory holds (see Raft.StateIndex).
	StateIndex uint64 `json:"state_index"`
	// Restarting: a snapshot was installed and the node is restarting to
	// load it; its state is stale until then.
	Restarting  bool   `json:"restarting"`
	LastIndex   uint64 `json:"last_index"`
	LastContact string `json:"last_contact"`
	Ready       bool   `json:"ready"`
	Voters      []Peer `json:"voters"`
	// Pipeline is where proposals' time went on this node since it
	// started (pipestats.go).
	Pipeline PipelineStats `json:"pipeline"`
	// Groups are the node's partition raft groups, if it runs any (the
	// fields above are the metadata group's).
	Groups []GroupStatus `json:"groups,omitempty"`
	// CoordinatorShards is how many partition raft groups the group and
	// transaction coordinators are spread over (0: the metadata group
	// alone); nil until the cluster fixed it.
	CoordinatorShards *int `json:"coordinator_shards,omitempty"`
}

// GroupStatus is one partition raft group in a node's Status.
type GroupStatus struct {
	Group       uint8  `json:"group"`
	LeaderID    int32  `json:"leader_id"`
	Term        uint64 `json:"term"`
	CommitIndex uint64 `json:"commit_index"`
	StateIndex  uint64 `json:"state_index"`
	Ready       bool   `json:"ready"`
}

// GroupStatus reports r as partition group g.
func (r *Raft) GroupStatus(g uint8) GroupStatus {
	return GroupStatus{Group: g, LeaderID: r.Leader(), Term: uint64(max(r.Term(), 0)), CommitIndex: r.raft.CommitIndex(), StateIndex: r.StateIndex(), Ready: r.ready.Load()}
}

// Status reports the node's raft state. nodes resolves voter addresses.
func (r *Raft) Status(nodes func(int32) (Peer, bool)) Status {
	st := r.raft.Stats()
	term, _ := strconv.ParseUint(st["term"], 10, 64)
	s := Status{
		NodeID:       r.o.Self.ID,
		LeaderID:     r.Leader(),
		State:        r.raft.State().String(),
		Term:         term,
		CommitIndex:  r.raft.CommitIndex(),
		AppliedIndex: r.raft.AppliedIndex(),
		StateIndex:   r.StateIndex(),
		Restarting:   r.fsm.restarting.Load(),
		LastIndex:    r.raft.LastIndex(),
		LastContact:  st["last_contact"],
		Ready:        r.ready.Load(),
		Pipeline:     r.stats.snapshot(),
	}
	for _, id := range r.Voters() {
		p, ok := nodes(id)
		if !ok {
			p = Peer{ID: id}
		}
		s.Voters = append(s.Voters, p)
	}
	return s
}

// StateIndex is the raft index of the last command whose effects are in
// this node's state directory: applied (not just handed to the FSM, as
// raft's AppliedIndex counts), or restored from a snapshot that recorded
// it. It does not move while the node is restarting to load an installed
// snapshot. No-op and barrier entries do not count, so nodes that applied
// the same commands report the same index: compare it with another node's
// StateIndex, not with a commit index.
func (r *Raft) StateIndex() uint64 { return r.fsm.lastApplied.Load() }

// Stats is raft's own statistics map.
func (r *Raft) Stats() map[string]string { return r.raft.Stats() }

// AddVoter adds (or re-addresses) a voter; leader only.
func (r *Raft) AddVoter(p Peer) error {
	if !r.ready.Load() {
		return r.notLeaderErr()
	}
	if err := r.raft.AddVoter(serverID(p.ID), raft.ServerAddress(p.Raft), 0, 30*time.Second).Error(); err != nil {
		return fmt.Errorf("add voter %d: %w", p.ID, err)
	}
	return nil
}

// RemoveVoter removes a voter; leader only.
func (r *Raft) RemoveVoter(id int32) error {
	if !r.ready.Load() {
		return r.notLeaderErr()
	}
	if err := r.raft.RemoveServer(serverID(id), 0, 30*time.Second).Error(); err != nil {
		return fmt.Errorf("remove voter %d: %w", id, err)
	}
	return nil
}

// TransferLeadership asks raft to hand leadership to another voter.
func (r *Raft) TransferLeadership() error { return r.raft.LeadershipTransfer().Error() }

// TransferLeadershipTo hands leadership to voter id (on the leader). It
// returns once raft has transferred it or given up (ElectLeaders waits
// for the new leader to be ready on its own).
func (r *Raft) TransferLeadershipTo(id int32) error {
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("transfer leadership to node %d: %w", id, err)
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && parseServerID(s.ID) == id {
			if err := r.raft.LeadershipTransferToServer(s.ID, s.Address).Error(); err != nil {
				return fmt.Errorf("transfer leadership to node %d: %w", id, err)
			}
			return nil
		}
	}
	return fmt.Errorf("transfer leadership to node %d: not a voter", id)
}

// Shutdown stops taking proposals, stops raft and closes its stores.
// Appliers stay registered; the caller closes its state afterwards.
func (r *Raft) Shutdown() error {
	var err error
	r.stopped.Do(func() {
		close(r.stop)
		if !r.started.Load() {
			close(r.fsm.readyCh)
		}
		// Raft first: it fails the futures still waiting for a commit,
		// which the completer is blocked on.
		r.raft.DeregisterObserver(r.obs)
		err = r.raft.Shutdown().Error()
		if r.started.Load() {
			close(r.raftDown)
		}
		r.wg.Wait()
		if cerr := r.trans.Close(); err == nil {
			err = cerr
		}
		if cerr := r.store.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// slogWriter forwards hclog's JSON lines to slog.
type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	var line struct {
		Level   string `json:"@level"`
		Message string `json:"@message"`
	}
	raw := trimNewline(p)
	if err := json.Unmarshal(raw, &line); err != nil || line.Message == "" {
		w.log.Info("raft", "line", string(raw))
		return len(p), nil
	}
	// Raft's periodic snapshot check reports an idle log as an error.
	if line.Message == "failed to take snapshot" && strings.Contains(string(raw), "nothing new to snapshot") {
		return len(p), nil
	}
	lv := slog.LevelInfo
	switch line.Level {
	case "trace", "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	w.log.Log(context.Background(), lv, "raft: "+line.Message, "detail", string(raw))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}

var _ io.Writer = (*slogWriter)(nil)
