// Package txn is the transaction coordinator: one state machine (Txn) per
// transactional id, owned by one actor that is spawned by the Coordinator
// and is not the child of any connection, so that a transaction outlives
// the connection that opened it until it ends or times out. State changes
// are written to an append-only record log under DataDir/txn/ before they
// are answered, and replayed when the Coordinator opens.
//
// In cluster mode the coordinator runs only on the raft leader: a
// Coordinator opened in standby applies the replicated records to its
// store and answers NOT_COORDINATOR until Activate, which resumes what the
// store holds (timeouts, markers of preparing transactions); Deactivate
// returns it to standby.
package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/internal/logevery"
	"github.com/regent-broker/regent/actors/lifecycle"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/logconfig"
)

// TxnPartition is what the coordinator needs of a partition: writing the
// control marker that ends a producer's transaction there.
// *partition.Partition satisfies it.
type TxnPartition interface {
	// WriteTxnMarker appends a COMMIT or ABORT control batch for the
	// producer's open transaction (success without writing when the
	// producer has none open there). reply is called once, must not block.
	WriteTxnMarker(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, reply func(err error))
}

// OffsetsSink is the group coordinator's side of transactional offsets
// (TxnOffsetCommit); *group.Manager satisfies it. The coordinator calls it
// from a transaction's actor, in order: for one producer id a
// TxnCommitOffsets always precedes the CompleteTxn that ends it, and the
// sink must apply calls in the order they were made (enqueue before
// returning).
type OffsetsSink interface {
	// TxnCommitOffsets holds req's offsets pending for (req.Group,
	// req.ProducerID): OffsetFetch does not show them, and a
	// requireStable fetch of those partitions answers
	// UNSTABLE_OFFSET_COMMIT, until CompleteTxn. Generation and member
	// (v3+) are checked as OffsetCommit checks them. The offsets are
	// durable when reply is called; reply is called once and must not
	// block. The coordinator has checked the transactional id, producer
	// id and epoch and that the group is in the transaction; the protocol
	// layer has checked that the topics exist.
	TxnCommitOffsets(req *kmsg.TxnOffsetCommitRequest, reply func(*kmsg.TxnOffsetCommitResponse))
	// CompleteTxn commits (commit) or drops every offset that producerID
	// staged in group, whatever epoch staged it. Nothing staged (or no
	// such group): done(nil). The outcome is durable when done(nil) is
	// called; on error the coordinator retries the same call, so it must
	// be idempotent.
	CompleteTxn(group string, producerID int64, commit bool, done func(err error))
}

// Options configures the coordinator. A zero field means its default.
type Options struct {
	// DataDir is the broker's data directory; the log is DataDir/txn/.
	DataDir string
	Root    *actor.RootContext
	Logger  *slog.Logger
	// NextProducerID hands out producer ids (the broker's allocator).
	NextProducerID func() (int64, error)
	// MaxTimeout is the largest transaction.timeout.ms accepted
	// (REGENT_TXN_MAX_TIMEOUT_MS); 0: one hour.
	MaxTimeout time.Duration
	// Partitions finds a partition for its markers; nil: the partition no
	// longer exists (its marker is skipped).
	Partitions func(topic string, partition int32) TxnPartition
	// Offsets takes transactional offset commits; nil: AddOffsetsToTxn
	// and TxnOffsetCommit answer COORDINATOR_NOT_AVAILABLE.
	Offsets OffsetsSink

	// IDExpiration is how long an idle transactional id is kept
	// (transactional.id.expiration.ms); 0: seven days.
	IDExpiration time.Duration
	// MaxIDs bounds the transactional ids held (budget.go): over it the
	// least recently updated idle ids expire early; 0: no bound.
	MaxIDs int
	// Fsync makes every write fsync before it is answered; otherwise the
	// broker calls Sync on its flush interval.
	Fsync bool
	// Repl orders the coordinator's writes; nil: a local replicator.
	Repl replication.Replicator
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	// Standby opens the store and registers it with Repl, so that
	// replicated records are applied, but runs nothing (no actors, no
	// timeouts; every request answers NOT_COORDINATOR) until Activate: a
	// raft follower.
	Standby bool
}

const (
	// defaultMaxTimeout is the broker config transaction.max.timeout.ms's
	// default: the bound enforced is the one DescribeConfigs reports.
	defaultMaxTimeout   = logconfig.TransactionMaxTimeoutMsDefault * time.Millisecond
	defaultIDExpiration = 7 * 24 * time.Hour
)

func (o *Options) withDefaults() Options {
	c := *o
	if c.MaxTimeout == 0 {
		c.MaxTimeout = defaultMaxTimeout
	}
	if c.IDExpiration == 0 {
		c.IDExpiration = defaultIDExpiration
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Repl == nil {
		c.Repl = replication.NewLocal()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (o *Options) validate() error {
	switch {
	case o.Root == nil:
		return errors.New("txn coordinator: no actor root")
	case o.DataDir == "":
		return errors.New("txn coordinator: no data directory")
	case o.NextProducerID == nil:
		return errors.New("txn coordinator: no producer id allocator")
	case o.Partitions == nil:
		return errors.New("txn coordinator: no partition lookup")
	case o.MaxTimeout < time.Millisecond || o.MaxTimeout > time.Duration(1<<31-1)*time.Millisecond:
		return errors.New("txn coordinator: max timeout out of range")
	}
	return nil
}

// replKey is the replicator key of the coordinator's record log.
const replKey = "txn"

// Coordinator maps transactional ids to their actors. Its methods are safe
// from any goroutine and never block on IO (except Activate, Deactivate and
// Close, which wait for actors): they hand the request to the id's actor,
// and reply is called once, on another goroutine or (for an id that does
// not exist, or a coordinator not serving) before the method returns.
// reply must not block.
//
// A Coordinator is active (serving, with an actor per id) or on standby
// (only its store, which the replicator keeps applying to).
type Coordinator struct {
	o      Options
	cfg    Config
	store  *Store
	logger *slog.Logger

	// refusedLog and evictLog space the budget's log lines (budget.go).
	refusedLog, evictLog logevery.Limiter

	// stats count KIP-890 traffic (tests, the interop must-show); atomic.
	stats struct {
		endTxnV5, implicitAdds, verifyRefused atomic.Int64
	}

	// life serializes Activate, Deactivate and Close; it is held while
	// they wait for actors, which never take it.
	life sync.Mutex

	// mu guards the serving state; actors take it (publish, retire), so
	// nothing waits for an actor while holding it.
	mu struct {
		sync.Mutex
		// actors, resting and summaries are the current activation's;
		// all are empty on standby. An id held has an actor or rests
		// (rest.go), and has a summary either way.
		actors    map[string]*actor.PID
		resting   map[string]*Txn
		summaries map[string]Summary
		// stop is closed when the current activation ends: its actors
		// stop waiting for persist answers and propose nothing more.
		stop   chan struct{}
		active bool
		closed bool
		// epoch is the current activation's coordinator epoch, which
		// its actors write into their markers.
		epoch int32
		// evicting is the ids asked to expire for the budget whose
		// actors have not answered yet (budget.go).
		evicting map[string]struct{}
		// evictedUnlogged is the ids passes asked to expire since a
		// pass was last logged.
		evictedUnlogged int
	}
}

var (
	// errClosed: the coordinator was closed.
	errClosed = errors.New("transaction coordinator is closed")
	// errDeactivated answers a persist that an ending activation gave up
	// on (or refused to propose).
	errDeactivated = errors.New("transaction coordinator deactivated")
)

// NewCoordinator opens (replaying) the transaction log and, unless
// o.Standby, starts an actor for every transactional id it holds;
// transactions found preparing are completed (markers re-sent) and open
// ones keep their deadline.
func NewCoordinator(o Options) (*Coordinator, error) {
	opts := o.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger.With("component", "txn")
	start := time.Now()
	store, loaded, err := OpenStore(filepath.Join(opts.DataDir, "txn"), opts.Fsync, logger)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		o:      opts,
		cfg:    Config{MaxTimeoutMs: int32(opts.MaxTimeout / time.Millisecond), IDExpirationMs: opts.IDExpiration.Milliseconds()},
		store:  store,
		logger: logger,
	}
	c.mu.actors = map[string]*actor.PID{}
	c.mu.resting = map[string]*Txn{}
	c.mu.summaries = map[string]Summary{}
	c.mu.evicting = map[string]struct{}{}
	opts.Repl.Register(replKey, store)
	if opts.Standby {
		logger.Info("transaction coordinator on standby", "ids", len(loaded))
		return c, nil
	}
	c.life.Lock()
	defer c.life.Unlock()
	if err := c.activateLocked(func() map[string]*Txn { return loaded }, start); err != nil {
		opts.Repl.Unregister(replKey)
		return nil, errors.Join(err, store.Close())
	}
	return c, nil
}

// Activate starts serving: it loads every transactional id from the
// store's current contents (as NewCoordinator does from the log) and
// starts their actors, which rearm timeouts and expiries and complete
// transactions found preparing (markers re-sent). Call it once the store
// has applied every record committed before this node became the leader
// (e.g. after a raft barrier). It first raises the coordinator epoch
// through the replicator (epoch.go) and fails, staying on standby, if that
// write fails. Activating an active coordinator does nothing; a closed one
// is an error.
func (c *Coordinator) Activate() error {
	c.life.Lock()
	defer c.life.Unlock()
	c.mu.Lock()
	closed, active := c.mu.closed, c.mu.active
	c.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("activate: %w", errClosed)
	case active:
		return nil
	}
	start := time.Now()
	return c.activateLocked(func() map[string]*Txn { return c.store.Txns() }, start)
}

// activateLocked raises the coordinator epoch, then spawns an actor for
// every id that load returns (read after the raise, which a new raft
// leader applies after everything before it). Called with life held on an
// inactive coordinator.
func (c *Coordinator) activateLocked(load func() map[string]*Txn, start time.Time) error {
	epoch, err := c.raiseEpoch()
	if err != nil {
		return err
	}
	loaded := load()
	counts := map[State]int{}
	c.mu.Lock()
	c.mu.active = true
	c.mu.epoch = epoch
	c.mu.stop = make(chan struct{})
	for id, t := range loaded {
		counts[t.State]++
		if restable(t) {
			c.mu.resting[id] = t
			c.mu.summaries[id] = summarize(t)
			continue
		}
		c.spawnLocked(id, t)
	}
	go c.sweepResting(c.mu.stop)
	c.mu.Unlock()
	c.logger.Info("recovered transactions", "coordinator_epoch", epoch, "ids", len(loaded), "ongoing", counts[StateOngoing],
		"preparing", counts[StatePrepareCommit]+counts[StatePrepareAbort], "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// raiseEpoch proposes the epoch raise and waits for its outcome.
func (c *Coordinator) raiseEpoch() (int32, error) {
	epoch, err := replication.Await[int32](c.o.Repl, replKey, epochCmd{}, nil)
	if err != nil {
		return noEpoch, fmt.Errorf("raise the transaction coordinator epoch: %w", err)
	}
	return epoch, nil
}

// CoordinatorEpoch is the epoch the current activation writes into its
// markers (-1: not active).
func (c *Coordinator) CoordinatorEpoch() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.active {
		return noEpoch
	}
	return c.mu.epoch
}

// Deactivate stops serving and returns to standby: every actor and its
// timers are stopped (what waits, including an actor blocked on a persist
// answer, is answered NOT_COORDINATOR) and requests answer
// NOT_COORDINATOR. Preparing transactions stay preparing in the store; the
// next active coordinator completes them. The store stays open and
// registered, so replicated records keep being applied. Deactivating a
// coordinator that is not active does nothing. It waits for the actors, so
// it must not be called from a reply callback (they run on actors'
// goroutines).
func (c *Coordinator) Deactivate() {
	c.life.Lock()
	defer c.life.Unlock()
	c.mu.Lock()
	if !c.mu.active {
		c.mu.Unlock()
		return
	}
	pids := c.takeActorsLocked()
	c.mu.Unlock()
	if err := c.stopActors(pids); err != nil {
		c.logger.Error("deactivate transaction coordinator", "err", err)
	}
	c.logger.Info("transaction coordinator on standby", "ids", len(pids))
}

// takeActorsLocked ends the activation (called with mu held): from here on
// requests are refused, actors blocked on a persist give up, and the old
// actors' publish and retire are ignored. It returns the actors, for
// stopActors.
func (c *Coordinator) takeActorsLocked() []*actor.PID {
	c.mu.active = false
	close(c.mu.stop)
	pids := make([]*actor.PID, 0, len(c.mu.actors))
	for _, pid := range c.mu.actors {
		pids = append(pids, pid)
	}
	c.mu.actors = map[string]*actor.PID{}
	c.mu.resting = map[string]*Txn{}
	c.mu.summaries = map[string]Summary{}
	c.mu.evicting = map[string]struct{}{}
	return pids
}

// stopActors stops taken actors, answering what waits with
// NOT_COORDINATOR. Called with life held.
func (c *Coordinator) stopActors(pids []*actor.PID) error {
	return lifecycle.StopAll(c.o.Root, pids, func(done chan struct{}) any { return &closeMsg{done: done} }, 10*time.Second, "transaction actors")
}

func (c *Coordinator) spawnLocked(id string, t *Txn) *actor.PID {
	if t != nil {
		c.mu.summaries[id] = summarize(t)
	}
	a := &txnActor{c: c, id: id, t: t, stop: c.mu.stop, epoch: c.mu.epoch, logger: c.logger.With("transactional_id", id)}
	pid := c.o.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	c.mu.actors[id] = pid
	return pid
}

// dispatch hands m to id's actor, spawning one for a request that may
// create the id; a request for an id that does not exist is answered here.
// The send happens under the lock, so that retire's last message is
// ordered after every request sent to the actor.
func (c *Coordinator) dispatch(id string, m request) {
	if id == epochKey {
		// The protocol layer refuses it first, as Kafka does; the key
		// is the coordinator epoch's in the log.
		m.failWith(kerr.InvalidRequest)
		return
	}
	c.mu.Lock()
	if c.mu.closed || !c.mu.active {
		c.mu.Unlock()
		m.failWith(kerr.NotCoordinator)
		return
	}
	pid := c.mu.actors[id]
	if pid == nil && c.mu.resting[id] != nil {
		pid = c.wakeLocked(id)
	}
	if _, creates := m.(*initMsg); pid == nil && creates {
		if !c.makeRoomLocked() {
			c.mu.Unlock()
			m.failWith(kerr.CoordinatorNotAvailable)
			return
		}
		pid = c.spawnLocked(id, nil)
	}
	if pid != nil {
		c.o.Root.Send(pid, m)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.detached(m)
}

// detached answers a request for an id with no state.
func (c *Coordinator) detached(m request) {
	switch m := m.(type) {
	case *describeMsg:
		m.failWith(kerr.TransactionalIDNotFound)
	case *offsetsMsg:
		if c.o.Offsets == nil {
			m.failWith(kerr.CoordinatorNotAvailable)
			return
		}
		m.failWith(kerr.InvalidProducerIDMapping)
	default:
		m.failWith(kerr.InvalidProducerIDMapping)
	}
}

// retire forgets id's actor (its id expired) and sends it its last
// message. An actor that is no longer current was taken by Deactivate or
// Close, which stop it themselves: stopping it here could drop the
// closeMsg they wait for.
func (c *Coordinator) retire(id string, pid *actor.PID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.mu.actors[id]; cur != nil && cur.Equal(pid) {
		delete(c.mu.actors, id)
		delete(c.mu.summaries, id)
		c.o.Root.Send(pid, &retireMsg{})
	}
}

// publish records what ListTransactions shows of an id, if pid is still
// the id's actor (one from an ended activation must not show on standby).
func (c *Coordinator) publish(id string, pid *actor.PID, t *Txn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.mu.actors[id]; cur == nil || !cur.Equal(pid) {
		return
	}
	if !t.live() {
		delete(c.mu.summaries, id)
		return
	}
	c.mu.summaries[id] = summarize(t)
}

// persist makes t durable through the replicator and waits for the
// answer: the calling actor (only that transactional id) blocks until it
// comes, or until stop (the actor's activation) closes: then the outcome
// is unknown, and the next activation loads whatever was committed. The
// store applies on the FSM goroutine (or inside Propose with the local
// replicator), never on this actor's, so the wait cannot deadlock.
func (c *Coordinator) persist(t *Txn, stop <-chan struct{}) error {
	select {
	case <-stop:
		return errDeactivated
	default:
	}
	cmd, err := newPutCmd(t)
	if err != nil {
		return err
	}
	// The store's Apply returns nil or an error (R = any).
	_, err = replication.Await[any](c.o.Repl, replKey, cmd, stop)
	if err != nil {
		select {
		case <-stop:
			return fmt.Errorf("%w: %w", errDeactivated, err)
		default:
		}
	}
	return err
}

// Sync fsyncs the transaction log (the broker's flush interval).
func (c *Coordinator) Sync() error {
	c.mu.Lock()
	s := c.store // Reopen replaces it
	c.mu.Unlock()
	return s.Sync()
}

// Close stops every transaction actor (answering what waits with
// NOT_COORDINATOR), unregisters the store and closes the log.
// Transactions stay as persisted; the next start resumes them.
func (c *Coordinator) Close() error {
	c.life.Lock()
	defer c.life.Unlock()
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	var pids []*actor.PID
	if c.mu.active {
		pids = c.takeActorsLocked()
	}
	c.mu.Unlock()
	err := c.stopActors(pids)
	c.o.Repl.Unregister(replKey)
	return errors.Join(err, c.store.Close())
}

// Reopen opens a closed coordinator's store again from its directory and
// registers it with the replicator, on standby (Activate serves again). A
// raft follower calls it after Close and a snapshot restore rewrote the
// state directory, so that everything holding this *Coordinator keeps
// working; it must run where nothing is applied to the store (the raft
// FSM goroutine, inside the restore). Between Close and Reopen every
// request answers NOT_COORDINATOR. On error the coordinator stays closed.
func (c *Coordinator) Reopen() error {
	c.life.Lock()
	defer c.life.Unlock()
	c.mu.Lock()
	closed := c.mu.closed
	c.mu.Unlock()
	if !closed {
		return errors.New("txn coordinator: reopen of an open coordinator")
	}
	store, loaded, err := OpenStore(filepath.Join(c.o.DataDir, "txn"), c.o.Fsync, c.logger)
	if err != nil {
		return fmt.Errorf("reopen transaction store: %w", err)
	}
	c.mu.Lock()
	c.store = store
	c.mu.closed = false
	c.mu.Unlock()
	c.o.Repl.Register(replKey, store)
	c.logger.Info("transaction coordinator reopened on standby", "ids", len(loaded))
	return nil
}
