package share

// The Manager: routes requests to the share-partition actors, spawned on
// first use with the state the store holds. In cluster mode it serves
// only on the raft leader: on standby its store applies the replicated
// writes, and Activate loads them.

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
)

// Manager maps share-partitions to their actors. Its methods are safe
// from any goroutine and never block on IO (except NewManager, Activate,
// Deactivate, Close and Reopen, which open files or wait for actors).
type Manager struct {
	o        Options
	logger   *slog.Logger
	storeDir string
	// cb gives the answers known without an actor, off the caller's
	// goroutine (the methods never answer inline).
	cb replication.Callbacks
	// w writes the actors' states, coalesced.
	w writer

	// onAvailable is told of records that became available to acquire
	// without an append (SetAvailableListener); nil: nobody listens.
	onAvailable atomic.Pointer[func(Key)]

	// life serializes Activate, Deactivate, Close and Reopen; held while
	// they wait for actors, which never take it.
	life sync.Mutex

	// mu guards the serving state; actors take it (forget), so nothing
	// waits for an actor while holding it. Messages are sent to actors
	// with mu held, so that a deactivation's poison pill follows every
	// message sent before it.
	mu struct {
		sync.Mutex
		store  *Store
		actors map[partKey]*actor.PID
		// sent counts the requests sent to each actor in actors: an
		// actor that has received as many may stop (retire).
		sent map[partKey]uint64
		// loaded is the stored states not yet handed to an actor.
		loaded map[partKey]*State
		// groups is the share-partitions of each group that have
		// state: what DeleteGroup, a member's release and listings visit.
		groups map[string]map[partKey]struct{}
		active bool
		closed bool
	}
}

// NewManager opens the store under o.DataDir/share and, unless
// o.Standby, serves what it holds.
func NewManager(o Options) (*Manager, error) {
	switch {
	case o.Root == nil:
		return nil, errors.New("share manager: no actor root")
	case o.DataDir == "":
		return nil, errors.New("share manager: no data directory")
	case o.Logs == nil:
		return nil, errors.New("share manager: no partition lookup")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Repl == nil {
		o.Repl = replication.NewLocal()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Manager{o: o, logger: o.Logger.With("component", "share"), storeDir: filepath.Join(o.DataDir, "share")}
	m.w.repl = o.Repl
	store, err := OpenStore(m.storeDir, o.Fsync, m.logger)
	if err != nil {
		return nil, err
	}
	m.mu.store = store
	m.mu.actors = map[partKey]*actor.PID{}
	m.mu.sent = map[partKey]uint64{}
	o.Repl.Register(replKey, store)
	if o.Standby {
		m.logger.Info("share-partitions on standby")
		return m, nil
	}
	if err := m.Activate(); err != nil {
		o.Repl.Unregister(replKey)
		return nil, errors.Join(err, store.Close())
	}
	return m, nil
}

// Activate starts serving from the store's current contents. Call it
// once the store has applied every write committed before this node
// became the leader. Activating an active manager does nothing.
func (m *Manager) Activate() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.mu.closed:
		return fmt.Errorf("activate: %w", errClosed)
	case m.mu.active:
		return nil
	}
	m.mu.loaded = m.mu.store.States()
	m.mu.groups = map[string]map[partKey]struct{}{}
	for k := range m.mu.loaded {
		m.noteLocked(k)
	}
	m.mu.active = true
	m.logger.Info("share-partitions loaded", "share_partitions", len(m.mu.loaded))
	return nil
}

// Deactivate stops serving: every actor stops (a write in flight answers
// REQUEST_TIMED_OUT, what waits NOT_LEADER_OR_FOLLOWER or
// NOT_COORDINATOR) and requests are refused until Activate. The store
// stays registered. It waits for the actors: never call it from a reply.
func (m *Manager) Deactivate() {
	m.life.Lock()
	defer m.life.Unlock()
	m.stopActors()
}

// stopActors ends the activation; called with life held.
func (m *Manager) stopActors() {
	m.mu.Lock()
	if !m.mu.active {
		m.mu.Unlock()
		return
	}
	m.mu.active = false
	pids := m.mu.actors
	m.mu.actors = map[partKey]*actor.PID{}
	m.mu.sent = map[partKey]uint64{}
	m.mu.loaded, m.mu.groups = nil, nil
	// Poison under mu: it is queued after every message sent so far.
	var futures []*actor.Future
	for _, pid := range pids {
		futures = append(futures, m.o.Root.PoisonFuture(pid))
	}
	m.mu.Unlock()
	for _, f := range futures {
		_ = f.Wait()
	}
}

// Close stops serving, unregisters the store and closes it.
func (m *Manager) Close() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.stopActors()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil
	}
	m.mu.closed = true
	ws := m.w.stats()
	m.logger.Info("share-partition state writes", "proposals", ws.Proposals, "puts", ws.Puts)
	m.o.Repl.Unregister(replKey)
	return m.mu.store.Close()
}

// Reopen opens a closed manager's store again (after a snapshot restore
// rewrote the state directory) and registers it, on standby.
func (m *Manager) Reopen() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.closed {
		return errors.New("share manager: reopen of an open manager")
	}
	store, err := OpenStore(m.storeDir, m.o.Fsync, m.logger)
	if err != nil {
		return fmt.Errorf("reopen share-partition store: %w", err)
	}
	m.mu.store, m.mu.closed = store, false
	m.o.Repl.Register(replKey, store)
	return nil
}

// Sync fsyncs the store (the broker's flush interval).
func (m *Manager) Sync() error {
	m.mu.Lock()
	s := m.mu.store
	m.mu.Unlock()
	return s.Sync()
}

// SetAvailableListener makes fn told, from a share-partition's actor,
// each time records of a share-partition became available to acquire
// without an append to its partition: locks expired, records released (a
// RELEASE acknowledgement, a member's or a session's release), or a full
// in-flight window made room. Key carries no topic id. fn must not block.
func (m *Manager) SetAvailableListener(fn func(Key)) {
	if fn == nil {
		m.onAvailable.Store(nil)
		return
	}
	m.onAvailable.Store(&fn)
}

func (m *Manager) available(k partKey) {
	if fn := m.onAvailable.Load(); fn != nil {
		(*fn)(Key{Group: k.Group, Topic: k.Topic, Partition: k.Partition})
	}
}

// WriteStats counts the state writes so far (metrics, measurements).
func (m *Manager) WriteStats() WriteStats { return m.w.stats() }

func (m *Manager) config(group string) Config {
	if m.o.Config == nil {
		return Config{}
	}
	return m.o.Config(group)
}

// noteLocked records k under its group.
func (m *Manager) noteLocked(k partKey) {
	g := m.mu.groups[k.Group]
	if g == nil {
		g = map[partKey]struct{}{}
		m.mu.groups[k.Group] = g
	}
	g[k] = struct{}{}
}

// track records whether k has state (called by k's actor when that
// changes).
func (m *Manager) track(k partKey, has bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.active {
		return // the next activation loads what the store holds
	}
	if has {
		m.noteLocked(k)
		return
	}
	if g := m.mu.groups[k.Group]; g != nil {
		delete(g, k)
		if len(g) == 0 {
			delete(m.mu.groups, k.Group)
		}
	}
}

// keysOf lists group's share-partitions (nil when not serving).
func (m *Manager) keysOf(group string, match func(partKey) bool) []partKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []partKey
	for k := range m.mu.groups[group] {
		if match == nil || match(k) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b partKey) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// dispatch hands r to k's actor, spawning it.
func (m *Manager) dispatch(k partKey, r request) {
	m.mu.Lock()
	if !m.mu.active || m.mu.closed {
		m.mu.Unlock()
		if gm, ok := r.(gathered); ok {
			if g := gm.detach(); g != nil {
				g.report(nil)
			}
		}
		m.later(func() { r.fail(r.notServing()) })
		return
	}
	pid := m.mu.actors[k]
	if pid == nil {
		a := newActor(m, k, m.mu.loaded[k])
		delete(m.mu.loaded, k)
		pid = m.o.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
		m.mu.actors[k] = pid
	}
	m.mu.sent[k]++
	m.o.Root.Send(pid, r)
	m.mu.Unlock()
}

// retire stops k's actor pid, which holds no state (never initialised, or
// deleted) and has nothing in flight, when it has received every request
// sent to it: none can be lost, and the next request for k spawns a new
// actor. Otherwise it does nothing (the actor asks again once it has
// served what came). Called from pid's actor.
func (m *Manager) retire(k partKey, pid *actor.PID, received uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.active || m.mu.actors[k] != pid || m.mu.sent[k] != received {
		return
	}
	delete(m.mu.actors, k)
	delete(m.mu.sent, k)
	m.o.Root.Stop(pid)
}

// actorCount is the number of live share-partition actors (tests).
func (m *Manager) actorCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.actors)
}

// later runs fn on the callback goroutine.
func (m *Manager) later(fn func()) { m.cb.Add(func(any, error) { fn() }, nil, nil) }

// Acquire acquires available records of req.Key for req.Member and
// locks them for the group's share.record.lock.duration.ms. The first
// Acquire of a share-partition initialises it from
// share.auto.offset.reset. The acquisition (the delivery counts) is
// durable before reply; on a write error the records stay as they were
// and reply gets the code (REQUEST_TIMED_OUT: the outcome is unknown).
// reply is called exactly once, never inline, and must not block.
func (m *Manager) Acquire(req AcquireRequest, reply func(AcquireResult)) {
	m.dispatch(req.Key.part(), &acquireMsg{req: req, reply: reply})
}

// AcquireAll is Acquire for several share-partitions at once (one
// ShareFetch's): their acquisitions are written together, one replicated
// write for all of them except those that wait behind a write of their
// own. reply(i, res) answers reqs[i], once each.
func (m *Manager) AcquireAll(reqs []AcquireRequest, reply func(i int, res AcquireResult)) {
	g := newGather(&m.w, len(reqs))
	for i, req := range reqs {
		m.dispatch(req.Key.part(), &acquireMsg{req: req, g: g, reply: func(res AcquireResult) { reply(i, res) }})
	}
}

// AckRequest is one share-partition's part of AcknowledgeAll.
type AckRequest struct {
	Key  Key
	Acks []AckBatch
}

// AcknowledgeAll is Acknowledge for several share-partitions of member at
// once, written together as AcquireAll's acquisitions are. reply(i, code)
// answers reqs[i], once each.
func (m *Manager) AcknowledgeAll(member string, reqs []AckRequest, reply func(i int, errorCode int16)) {
	g := newGather(&m.w, len(reqs))
	for i, r := range reqs {
		m.dispatch(r.Key.part(), &ackMsg{member: member, acks: r.Acks, g: g, reply: func(code int16) { reply(i, code) }})
	}
}

// Acknowledge applies member's acknowledgements to k, all or none: an
// ack of an offset that member does not hold acquired (its lock expired,
// another member's, never acquired) answers INVALID_RECORD_STATE and
// changes nothing; a malformed batch INVALID_REQUEST. Durable before
// reply (0).
func (m *Manager) Acknowledge(k Key, member string, acks []AckBatch, reply func(errorCode int16)) {
	m.dispatch(k.part(), &ackMsg{member: member, acks: acks, reply: reply})
}

// ReleaseMember makes every record member holds acquired in k AVAILABLE
// again (ARCHIVED at the delivery limit): its share session closed.
func (m *Manager) ReleaseMember(k Key, member string, reply func(errorCode int16)) {
	m.dispatch(k.part(), &releaseMsg{member: member, reply: reply})
}

// ReleaseGroupMember is ReleaseMember over every share-partition of
// group: the member left the group or was fenced. reply gets the first
// error code, if any.
func (m *Manager) ReleaseGroupMember(group, member string, reply func(errorCode int16)) {
	keys := m.keysOf(group, nil)
	j := newJoin(len(keys), reply)
	if len(keys) == 0 {
		m.later(func() { reply(0) })
		return
	}
	for _, k := range keys {
		m.dispatch(k, &releaseMsg{member: member, reply: j.add})
	}
}

// StartOffsets answers the SPSO and lag of group's share-partitions in
// parts, in order (StartOffset -1: never initialised); nil parts: every
// share-partition of the group with state.
func (m *Manager) StartOffsets(group string, parts []TopicPartition, reply func([]StartOffset)) {
	if parts == nil {
		for _, k := range m.keysOf(group, nil) {
			parts = append(parts, TopicPartition{Topic: k.Topic, Partition: k.Partition})
		}
	}
	if len(parts) == 0 {
		m.later(func() { reply(nil) })
		return
	}
	out := make([]StartOffset, len(parts))
	var mu sync.Mutex
	left := len(parts)
	for i, tp := range parts {
		m.dispatch(partKey{Group: group, Topic: tp.Topic, Partition: tp.Partition}, &startMsg{tp: tp, reply: func(so StartOffset) {
			mu.Lock()
			out[i] = so
			left--
			done := left == 0
			mu.Unlock()
			if done {
				reply(out)
			}
		}})
	}
}

// AlterStartOffsets resets each share-partition to start at the given
// offset, dropping its in-flight records (the caller checks that the
// group is empty; a share-partition whose records a member holds all the
// same answers NON_EMPTY_GROUP). Durable before reply.
func (m *Manager) AlterStartOffsets(group string, offs []StartOffset, reply func([]StartOffsetResult)) {
	if len(offs) == 0 {
		m.later(func() { reply(nil) })
		return
	}
	out := make([]StartOffsetResult, len(offs))
	var mu sync.Mutex
	left := len(offs)
	finish := func(i int, code int16) {
		mu.Lock()
		out[i] = StartOffsetResult{Topic: offs[i].Topic, Partition: offs[i].Partition, ErrorCode: code}
		left--
		done := left == 0
		mu.Unlock()
		if done {
			reply(out)
		}
	}
	for i, o := range offs {
		if o.StartOffset < 0 {
			m.later(func() { finish(i, kerr.InvalidRequest.Code) })
			continue
		}
		m.dispatch(partKey{Group: group, Topic: o.Topic, Partition: o.Partition}, &alterMsg{off: o, reply: func(code int16) { finish(i, code) }})
	}
}

// DeleteState forgets group's share-partitions of the given topics
// (DeleteShareGroupOffsets). reply gets the first error code, if any.
// A share-partition whose records a member holds is kept and answers
// NON_EMPTY_GROUP (see memberHoldsRecords).
func (m *Manager) DeleteState(group string, topics []string, reply func(errorCode int16)) {
	m.deleteWhere(group, func(k partKey) bool { return slices.Contains(topics, k.Topic) }, true, reply)
}

// DeleteGroup forgets every share-partition of group (the group was
// deleted).
func (m *Manager) DeleteGroup(group string, reply func(errorCode int16)) {
	m.deleteWhere(group, nil, false, reply)
}

func (m *Manager) deleteWhere(group string, match func(partKey) bool, ifUnlocked bool, reply func(int16)) {
	m.mu.Lock()
	serving := m.mu.active && !m.mu.closed
	m.mu.Unlock()
	if !serving {
		m.later(func() { reply(kerr.NotCoordinator.Code) })
		return
	}
	keys := m.keysOf(group, match)
	if len(keys) == 0 {
		m.later(func() { reply(0) })
		return
	}
	j := newJoin(len(keys), reply)
	for _, k := range keys {
		m.dispatch(k, &deleteMsg{ifUnlocked: ifUnlocked, reply: j.add})
	}
}

// inspect returns a copy of k's state (tests); nil when not serving.
func (m *Manager) inspect(k Key) *State {
	ch := make(chan *State, 1)
	m.dispatch(k.part(), &inspectMsg{reply: func(s *State) { ch <- s }})
	return <-ch
}

// join collects n error codes and answers the first non-zero one.
type join struct {
	mu    sync.Mutex
	left  int
	code  int16
	reply func(int16)
}

func newJoin(n int, reply func(int16)) *join { return &join{left: n, reply: reply} }

func (j *join) add(code int16) {
	j.mu.Lock()
	if j.code == 0 {
		j.code = code
	}
	j.left--
	done := j.left == 0
	code = j.code
	j.mu.Unlock()
	if done {
		j.reply(code)
	}
}
