// Package group is the consumer-group coordinator: the classic protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, static membership),
// committed offsets (with transactions' staged offsets), and the KIP-848
// consumer protocol with server-side assignors.
//
// Each group is a pure state machine (Group) owned by one actor; the
// Manager maps group ids to actors, creating them on demand. Offsets and
// group metadata are persisted in one record log (Store) through the
// replicator and replayed when the Manager opens.
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

	"github.com/regent-broker/regent/cluster"
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
	Repl cluster.Replicator
	// Fsync makes every write fsync before it is answered; otherwise the
	// broker calls Sync on its flush interval.
	Fsync bool
}

// Manager owns every group's coordinator actor. Its methods are safe from
// any goroutine and never block: they hand the request to the group's
// actor, and reply is called once, on another goroutine or (for a group
// that does not exist) before the method returns. reply must not block.
type Manager struct {
	cfg    Config
	root   *actor.RootContext
	store  *Store
	repl   cluster.Replicator
	logger *slog.Logger

	stop chan struct{}
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		actors    map[string]*actor.PID
		summaries map[string]Summary
		closed    bool
	}
}

// NewManager loads persisted groups and offsets and starts an actor for
// every group that exists.
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
	start := time.Now()
	store, loaded, err := OpenStore(filepath.Join(o.DataDir, "groups"), o.Fsync, logger)
	if err != nil {
		return nil, err
	}
	repl := o.Repl
	if repl == nil {
		repl = cluster.NewLocal()
	}
	repl.Register(replKey, store)
	m := &Manager{cfg: cfg, root: o.Root, store: store, repl: repl, logger: logger, stop: make(chan struct{})}
	m.mu.actors = map[string]*actor.PID{}
	m.mu.summaries = map[string]Summary{}
	now := time.Now()
	offsets := 0
	m.mu.Lock()
	for id, recs := range loaded {
		g := NewGroup(id, &m.cfg)
		g.Restore(recs, now)
		if !g.Live() {
			continue
		}
		offsets += len(g.offsets)
		m.spawnLocked(id, g)
	}
	n := len(m.mu.actors)
	m.mu.Unlock()
	logger.Info("recovered groups", "groups", n, "offsets", offsets, "took", time.Since(start).Round(time.Millisecond))
	m.wg.Add(1)
	go m.expireLoop()
	return m, nil
}

func (m *Manager) spawnLocked(id string, g *Group) *actor.PID {
	a := &groupActor{m: m, g: g, refs: map[Ref]*opMsg{}, logger: m.logger.With("group", id)}
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
	if m.mu.closed {
		m.mu.Unlock()
		op.reply(op.fail(kerr.NotCoordinator.Code))
		return
	}
	pid := m.mu.actors[id]
	if pid == nil && op.create {
		pid = m.spawnLocked(id, NewGroup(id, &m.cfg))
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

// retire forgets id's actor and sends it its last message.
func (m *Manager) retire(id string, pid *actor.PID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.mu.actors[id]; cur != nil && cur.Equal(pid) {
		delete(m.mu.actors, id)
		delete(m.mu.summaries, id)
	}
	m.root.Send(pid, &retireMsg{})
}

// publish records what ListGroups shows of a group.
func (m *Manager) publish(id string, s Summary, live bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !live {
		delete(m.mu.summaries, id)
		return
	}
	if m.mu.summaries[id] != s {
		m.mu.summaries[id] = s
	}
}

func (m *Manager) expireLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.RetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.ExpireOffsets()
		}
	}
}

// ExpireOffsets runs offset expiry on every group now (normally every
// offsets.retention.check.interval.ms).
func (m *Manager) ExpireOffsets() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pid := range m.mu.actors {
		m.root.Send(pid, &expireMsg{})
	}
}

// TopicsDeleted drops every group's committed offsets for the named
// topics (call it when topics are deleted). It returns at once; the
// groups forget the offsets shortly after.
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
}

// ListGroups lists every existing group, sorted by id.
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
func (m *Manager) Sync() error { return m.store.Sync() }

// Close stops every group actor (answering what waits with
// NOT_COORDINATOR) and closes the log.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	pids := make([]*actor.PID, 0, len(m.mu.actors))
	for _, pid := range m.mu.actors {
		pids = append(pids, pid)
	}
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	deadline := time.After(10 * time.Second)
	var err error
	dones := make([]chan struct{}, len(pids))
	for i, pid := range pids {
		dones[i] = make(chan struct{})
		m.root.Send(pid, &closeMsg{done: dones[i]})
	}
	for i, pid := range pids {
		if err == nil {
			select {
			case <-dones[i]:
			case <-deadline:
				err = fmt.Errorf("group actors did not stop within 10s")
			}
		}
		m.root.Stop(pid)
	}
	m.repl.Unregister(replKey)
	return errors.Join(err, m.store.Close())
}
