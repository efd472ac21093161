// Package group is the consumer-group coordinator: the classic protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, static membership),
// committed offsets (with transactions' staged offsets), the KIP-848
// consumer protocol with server-side assignors, and KIP-932 share group
// membership (share*.go; the share-partitions themselves are actors/share).
//
// Each group is a pure state machine (Group) owned by one actor; the
// Manager maps group ids to actors, creating them on demand. Offsets and
// group metadata are persisted in one record log (Store) through the
// replicator and replayed when the Manager opens.
//
// In cluster mode the coordinator serves only on the raft leader: a
// Manager opened in standby applies the replicated records to its store
// and answers NOT_COORDINATOR until Activate; Deactivate returns it there.
package group

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/internal/logevery"
	"github.com/regent-broker/regent/actors/lifecycle"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/logconfig"
)

// replKey is the replicator key of the coordinator's record log.
const replKey = "groups"

// Options configures the coordinator.
type Options struct {
	DataDir string
	Root    *actor.RootContext
	Logger  *slog.Logger
	// Broker holds the broker config; its group.* and offsets.* keys
	// (group.initial.rebalance.delay.ms, ...) configure the coordinator.
	Broker logconfig.Broker
	// Config, if set, is used instead of what Broker says (tests).
	Config *Config
	// Repl orders the coordinator's writes; nil: a local replicator.
	Repl replication.Replicator
	// Fsync makes every write fsync before it is answered; otherwise the
	// broker calls Sync on its flush interval.
	Fsync bool
	// Standby opens the store and registers it with Repl, so that
	// replicated records are applied, but serves nothing (every request
	// answers NOT_COORDINATOR) until Activate: a raft follower.
	Standby bool
	// GroupConsumerTimeouts gives each group's own consumer session
	// timeout and heartbeat interval (Config.GroupConsumerTimeouts); nil:
	// the broker's for every group.
	GroupConsumerTimeouts func(group string) (session, heartbeat time.Duration)
	// GroupShareTimeouts gives each share group's own session timeout and
	// heartbeat interval (Config.GroupShareTimeouts); nil: the broker's.
	GroupShareTimeouts func(group string) (session, heartbeat time.Duration)
	// GroupStreamsConfigs gives each streams group's session timeout,
	// heartbeat interval and standby replicas (Config.GroupStreamsConfigs);
	// nil: the broker's.
	GroupStreamsConfigs func(group string) (session, heartbeat time.Duration, standbys int)
	// MaxGroups bounds the groups the coordinator holds (budget.go): a
	// request that would create one more is refused; 0: no bound.
	MaxGroups int
	// MaxPendingIDs bounds the pending member ids the coordinator's groups
	// hold (pending.go), unless Config.Pending is set; 0:
	// DefaultMaxPendingIDs.
	MaxPendingIDs int
}

// Manager owns every group's coordinator actor. Its methods are safe from
// any goroutine and never block (except Activate, Deactivate and Close,
// which wait for actors and loops): they hand the request to the group's
// actor, and reply is called once, on another goroutine or (for a group
// that does not exist, or a manager not serving) before the method
// returns. reply must not block.
//
// A Manager is active (serving, with actors and the expiry loop) or on
// standby (only its store, which the replicator keeps applying to).
type Manager struct {
	cfg    Config
	root   *actor.RootContext
	store  *Store
	repl   replication.Replicator
	logger *slog.Logger
	// storeDir and fsync open the store again (Reopen).
	storeDir string
	fsync    bool
	// maxGroups is Options.MaxGroups (budget.go); refusedLog spaces its
	// warnings.
	maxGroups  int
	refusedLog logevery.Limiter
	// share holds the share-group listeners (SetShareMemberListener,
	// SetShareGroupDeletedListener); read by actors, set by the wiring.
	share shareHooks
	// txnEnds guards offsets staged after a remote check (txn_guard.go).
	txnEnds txnEndCounts

	// life serializes Activate, Deactivate and Close, and guards wg (the
	// current activation's expiry loop). It is held while they wait for
	// actors; actors never take it.
	life sync.Mutex
	wg   sync.WaitGroup

	// mu guards the serving state; actors take it (publish, retire), so
	// nothing waits for an actor while holding it.
	mu struct {
		sync.Mutex
		// actors and summaries are the current activation's; both are
		// empty on standby.
		actors    map[string]*actor.PID
		summaries map[string]Summary
		// dormant is the idle groups resting without an actor
		// (dormant.go); their summaries stay in summaries. A group
		// is in actors or dormant, never both.
		dormant map[string]*Group

		// stop is closed when the current activation ends: its actors
		// propose nothing after that, and its expiry loop returns.
		stop   chan struct{}
		active bool
		closed bool
	}
}

var (
	// errClosed: the manager was closed.
	errClosed = errors.New("group manager is closed")
	// errDeactivated answers a write that an ending activation refused
	// to propose.
	errDeactivated = errors.New("group coordinator deactivated")
)

// NewManager opens the record log and, unless o.Standby, loads persisted
// groups and offsets and starts an actor for every group that exists.
func NewManager(o Options) (*Manager, error) {
	if o.Root == nil {
		return nil, errors.New("group manager: no actor root")
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "groups")
	var cfg Config
	if o.Config != nil {
		cfg = o.Config.withDefaults()
	} else {
		var err error
		if cfg, err = ConfigFromBroker(o.Broker); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.GroupConsumerTimeouts != nil {
		cfg.GroupConsumerTimeouts = o.GroupConsumerTimeouts
	}
	if o.GroupShareTimeouts != nil {
		cfg.GroupShareTimeouts = o.GroupShareTimeouts
	}
	if o.GroupStreamsConfigs != nil {
		cfg.GroupStreamsConfigs = o.GroupStreamsConfigs
	}
	start := time.Now()
	storeDir := filepath.Join(o.DataDir, "groups")
	store, loaded, err := OpenStore(storeDir, o.Fsync, logger)
	if err != nil {
		return nil, err
	}
	repl := o.Repl
	if repl == nil {
		repl = replication.NewLocal()
	}
	repl.Register(replKey, store)
	if cfg.Pending == nil {
		limit := o.MaxPendingIDs
		if limit <= 0 {
			limit = DefaultMaxPendingIDs
		}
		cfg.Pending = NewPendingBudget(limit)
	}
	m := &Manager{cfg: cfg, root: o.Root, store: store, repl: repl, logger: logger, storeDir: storeDir, fsync: o.Fsync, maxGroups: o.MaxGroups}
	m.mu.actors = map[string]*actor.PID{}
	m.mu.summaries = map[string]Summary{}
	m.mu.dormant = map[string]*Group{}
	if o.Standby {
		logger.Info("group coordinator on standby", "groups", len(loaded))
		return m, nil
	}
	m.life.Lock()
	defer m.life.Unlock()
	m.activateLocked(loaded, start)
	return m, nil
}

// Activate starts serving: it loads every group from the store's current
// contents (as NewManager does from the log), starts their actors and the
// expiry loop. Call it once the store has applied every record committed
// before this node became the leader (e.g. after a raft barrier), so that
// nothing committed is missing from the loaded groups. Activating an
// active manager does nothing; a closed one is an error.
func (m *Manager) Activate() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	closed, active := m.mu.closed, m.mu.active
	m.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("activate: %w", errClosed)
	case active:
		return nil
	}
	start := time.Now()
	m.activateLocked(m.store.Groups(), start)
	return nil
}

// activateLocked spawns an actor for every live group of loaded and
// starts the expiry loop. Called with life held on an inactive manager.
func (m *Manager) activateLocked(loaded map[string][]Record, start time.Time) {
	now := time.Now()
	offsets := 0
	m.mu.Lock()
	m.mu.active = true
	m.mu.stop = make(chan struct{})
	stop := m.mu.stop
	// The last activation's actors are stopped and released theirs; a
	// new activation's groups hold none.
	m.cfg.Pending.reset()
	for id, recs := range loaded {
		g := NewGroup(id, &m.cfg)
		g.Restore(recs, now)
		if !g.Live() {
			continue
		}
		offsets += g.offsets.Len()
		if g.Dormant() {
			m.mu.dormant[id] = g
			if s, ok := g.Summary(); ok {
				m.mu.summaries[id] = s
			}
			continue
		}
		m.spawnLocked(id, g, false)
	}
	n, dormant := len(m.mu.actors)+len(m.mu.dormant), len(m.mu.dormant)
	m.mu.Unlock()
	m.logger.Info("recovered groups", "groups", n, "idle", dormant, "offsets", offsets, "took", time.Since(start).Round(time.Millisecond))
	m.wg.Add(1)
	go m.expireLoop(stop)
}

// Deactivate stops serving and returns to standby: every actor is stopped
// (what waits is answered NOT_COORDINATOR), the expiry loop ends, and
// requests answer NOT_COORDINATOR. The store stays open and registered,
// so replicated records keep being applied. Deactivating a manager that
// is not active does nothing. It waits for the actors, so it must not be
// called from a reply callback (they run on actors' goroutines).
func (m *Manager) Deactivate() {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	if !m.mu.active {
		m.mu.Unlock()
		return
	}
	pids := m.takeActorsLocked()
	m.mu.Unlock()
	if err := m.stopActivationLocked(pids); err != nil {
		m.logger.Error("deactivate group coordinator", "err", err)
	}
	m.logger.Info("group coordinator on standby", "groups", len(pids))
}

// takeActorsLocked ends the activation (called with mu held): from here on
// requests are refused, and the old actors' publish and retire are
// ignored. It returns the actors, for stopActivationLocked.
func (m *Manager) takeActorsLocked() []*actor.PID {
	m.mu.active = false
	close(m.mu.stop)
	pids := make([]*actor.PID, 0, len(m.mu.actors))
	for _, pid := range m.mu.actors {
		pids = append(pids, pid)
	}
	m.mu.actors = map[string]*actor.PID{}
	m.mu.summaries = map[string]Summary{}
	m.mu.dormant = map[string]*Group{}
	return pids
}

// stopActivationLocked stops the expiry loop and the taken actors,
// answering what waits with NOT_COORDINATOR. Called with life held.
func (m *Manager) stopActivationLocked(pids []*actor.PID) error {
	m.wg.Wait()
	return lifecycle.StopAll(m.root, pids, func(done chan struct{}) any { return &closeMsg{done: done} }, 10*time.Second, "group actors")
}

// spawnLocked starts an actor for g; woken: g was dormant and the actor is
// spawned for a message already on its way.
func (m *Manager) spawnLocked(id string, g *Group, woken bool) *actor.PID {
	a := &groupActor{m: m, g: g, stop: m.mu.stop, refs: map[Ref]*opMsg{}, logger: m.logger.With("group", id), woken: woken}
	pid := m.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	m.mu.actors[id] = pid
	if s, ok := g.Summary(); ok {
		m.mu.summaries[id] = s
	}
	return pid
}

// dispatch hands op to id's actor (spawning one if op may create the
// group), or answers it on a scratch state when the group does not exist.
// The send happens under the lock, so that retire's last message is
// ordered after every op sent to the actor.
func (m *Manager) dispatch(id string, op *opMsg) {
	m.mu.Lock()
	if m.mu.closed || !m.mu.active {
		m.mu.Unlock()
		op.reply(op.fail(kerr.NotCoordinator.Code))
		return
	}
	pid := m.mu.actors[id]
	if g := m.mu.dormant[id]; pid == nil && g != nil {
		pid = m.wakeLocked(id, g)
	}
	if pid == nil && op.create {
		if !m.roomLocked(id) {
			m.mu.Unlock()
			op.reply(op.fail(kerr.PolicyViolation.Code))
			return
		}
		pid = m.spawnLocked(id, NewGroup(id, &m.cfg), false)
	}
	if pid != nil {
		m.root.Send(pid, op)
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.detached(id, op)
}

// detached runs a step that cannot create its group against a group that
// does not exist: no actor, no records.
func (m *Manager) detached(id string, op *opMsg) {
	g := NewGroup(id, &m.cfg)
	var resp kmsg.Response
	func() {
		defer func() {
			if p := recover(); p != nil {
				m.logger.Error("group step panicked", "group", id, "panic", p)
				resp = op.fail(kerr.UnknownServerError.Code)
			}
		}()
		eff := op.do(g, time.Now(), 1)
		if len(eff.Records) > 0 || g.Live() {
			m.logger.Error("a step on a missing group tried to create it", "group", id)
		}
		for _, r := range eff.Replies {
			if r.To == 1 {
				resp = r.Resp
			}
		}
	}()
	if resp == nil {
		resp = op.fail(kerr.UnknownServerError.Code)
	}
	op.reply(resp)
}

// retire forgets id's actor and sends it its last message. An actor that
// is no longer current was taken by Deactivate or Close, which stop it
// themselves: stopping it here could drop the closeMsg they wait for.
func (m *Manager) retire(id string, pid *actor.PID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.mu.actors[id]; cur != nil && cur.Equal(pid) {
		delete(m.mu.actors, id)
		delete(m.mu.summaries, id)
		m.root.Send(pid, &retireMsg{})
	}
}

// publish records what ListGroups shows of a group, if pid is still the
// group's actor (one from an ended activation must not show on standby).
func (m *Manager) publish(id string, pid *actor.PID, s Summary, live bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.mu.actors[id]; cur == nil || !cur.Equal(pid) {
		return
	}
	if !live {
		delete(m.mu.summaries, id)
		return
	}
	if m.mu.summaries[id] != s {
		m.mu.summaries[id] = s
	}
}

func (m *Manager) expireLoop(stop <-chan struct{}) {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.RetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			m.ExpireOffsets()
		}
	}
}

// ExpireOffsets runs offset expiry on every group now (normally every
// offsets.retention.check.interval.ms). On standby there is nothing to
// expire: the active coordinator's expiry is replicated.
func (m *Manager) ExpireOffsets() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pid := range m.mu.actors {
		m.root.Send(pid, &expireMsg{})
	}
	now := time.Now()
	m.wakeDueLocked(func(g *Group) bool { return g.ExpiryDue(now) }, &expireMsg{})
}

// TopicsDeleted drops every group's committed offsets for the named
// topics (call it when topics are deleted). It returns at once; the
// groups forget the offsets shortly after. On standby it does nothing:
// the active coordinator's drops are replicated.
func (m *Manager) TopicsDeleted(names ...string) {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pid := range m.mu.actors {
		m.root.Send(pid, &dropTopicsMsg{names: set})
	}
	m.wakeDueLocked(func(g *Group) bool { return g.HasOffsetsFor(set) }, &dropTopicsMsg{names: set})
}

// ListGroups lists every existing group, sorted by id; none on standby.
func (m *Manager) ListGroups() []Summary {
	m.mu.Lock()
	out := make([]Summary, 0, len(m.mu.summaries))
	for _, s := range m.mu.summaries {
		out = append(out, s)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// Sync fsyncs the coordinator's log.
func (m *Manager) Sync() error {
	m.mu.Lock()
	s := m.store // Reopen replaces it
	m.mu.Unlock()
	return s.Sync()
}

// Close stops every group actor (answering what waits with
// NOT_COORDINATOR), unregisters the store and closes the log.
func (m *Manager) Close() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	wasActive := m.mu.active
	var pids []*actor.PID
	if wasActive {
		pids = m.takeActorsLocked()
	}
	m.mu.Unlock()
	var err error
	if wasActive {
		err = m.stopActivationLocked(pids)
	}
	m.repl.Unregister(replKey)
	return errors.Join(err, m.store.Close())
}

// Reopen opens a closed manager's store again from its directory and
// registers it with the replicator, on standby (Activate serves again). A
// raft follower calls it after Close and a snapshot restore rewrote the
// state directory, so that everything holding this *Manager keeps working;
// it must run where nothing is applied to the store (the raft FSM
// goroutine, inside the restore). Between Close and Reopen every request
// answers NOT_COORDINATOR. On error the manager stays closed.
func (m *Manager) Reopen() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	closed := m.mu.closed
	m.mu.Unlock()
	if !closed {
		return errors.New("group manager: reopen of an open manager")
	}
	store, loaded, err := OpenStore(m.storeDir, m.fsync, m.logger)
	if err != nil {
		return fmt.Errorf("reopen group store: %w", err)
	}
	m.mu.Lock()
	m.store = store
	m.mu.closed = false
	m.mu.Unlock()
	m.repl.Register(replKey, store)
	m.logger.Info("group coordinator reopened on standby", "groups", len(loaded))
	return nil
}
