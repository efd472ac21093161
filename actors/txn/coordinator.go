// Package txn is the transaction coordinator: one state machine (Txn) per
// transactional id, owned by one actor that is spawned by the Coordinator
// and is not the child of any connection, so that a transaction outlives
// the connection that opened it until it ends or times out. State changes
// are written to an append-only record log under DataDir/txn/ before they
// are answered, and replayed when the Coordinator opens.
package txn

import (
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/cluster"
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
	// Fsync makes every write fsync before it is answered; otherwise the
	// broker calls Sync on its flush interval.
	Fsync bool
	// Repl orders the coordinator's writes; nil: a local replicator.
	Repl cluster.Replicator
	// CoordinatorEpoch is written into markers (raft term in cluster
	// mode); 0 in single-node mode.
	CoordinatorEpoch int32
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

const (
	defaultMaxTimeout   = time.Hour
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
		c.Repl = cluster.NewLocal()
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
// from any goroutine and never block on IO: they hand the request to the
// id's actor, and reply is called once, on another goroutine or (for an id
// that does not exist, or a closed coordinator) before the method returns.
// reply must not block.
type Coordinator struct {
	o      Options
	cfg    Config
	store  *Store
	logger *slog.Logger

	mu struct {
		sync.Mutex
		actors    map[string]*actor.PID
		summaries map[string]Summary
		closed    bool
	}
}

// NewCoordinator opens (replaying) the transaction log and starts an actor
// for every transactional id it holds; transactions found preparing are
// completed (markers re-sent) and open ones keep their deadline.
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
	c.mu.summaries = map[string]Summary{}
	opts.Repl.Register(replKey, store)
	counts := map[State]int{}
	c.mu.Lock()
	for id, t := range loaded {
		counts[t.State]++
		c.spawnLocked(id, t)
	}
	c.mu.Unlock()
	logger.Info("recovered transactions", "ids", len(loaded), "ongoing", counts[StateOngoing],
		"preparing", counts[StatePrepareCommit]+counts[StatePrepareAbort], "took", time.Since(start).Round(time.Millisecond))
	return c, nil
}

func (c *Coordinator) spawnLocked(id string, t *Txn) *actor.PID {
	if t != nil {
		c.mu.summaries[id] = summarize(t)
	}
	a := &txnActor{c: c, id: id, t: t, logger: c.logger.With("transactional_id", id)}
	pid := c.o.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	c.mu.actors[id] = pid
	return pid
}

// dispatch hands m to id's actor, spawning one for a request that may
// create the id; a request for an id that does not exist is answered here.
// The send happens under the lock, so that retire's last message is
// ordered after every request sent to the actor.
func (c *Coordinator) dispatch(id string, m request) {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		m.failWith(kerr.NotCoordinator)
		return
	}
	pid := c.mu.actors[id]
	if _, creates := m.(*initMsg); pid == nil && creates {
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
// message.
func (c *Coordinator) retire(id string, pid *actor.PID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.mu.actors[id]; cur != nil && cur.Equal(pid) {
		delete(c.mu.actors, id)
		delete(c.mu.summaries, id)
	}
	c.o.Root.Send(pid, &retireMsg{})
}

// publish records what ListTransactions shows of an id.
func (c *Coordinator) publish(id string, t *Txn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.live() {
		delete(c.mu.summaries, id)
		return
	}
	c.mu.summaries[id] = summarize(t)
}

// persist makes t durable through the replicator. The local replicator
// answers before Propose returns; one that answers later blocks the
// calling actor (only that transactional id) until it does.
func (c *Coordinator) persist(t *Txn) error {
	done := make(chan error, 1)
	c.o.Repl.Propose(replKey, &putCmd{txn: t}, func(res any, err error) {
		if err == nil {
			if e, ok := res.(error); ok {
				err = e
			}
		}
		done <- err
	})
	return <-done
}

// Sync fsyncs the transaction log (the broker's flush interval).
func (c *Coordinator) Sync() error { return c.store.Sync() }

// Close stops every transaction actor (answering what waits with
// NOT_COORDINATOR) and closes the log. Transactions stay as persisted; the
// next start resumes them.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	pids := make([]*actor.PID, 0, len(c.mu.actors))
	for _, pid := range c.mu.actors {
		pids = append(pids, pid)
	}
	c.mu.Unlock()
	dones := make([]chan struct{}, len(pids))
	for i, pid := range pids {
		dones[i] = make(chan struct{})
		c.o.Root.Send(pid, &closeMsg{done: dones[i]})
	}
	deadline := time.After(10 * time.Second)
	var err error
	for i, pid := range pids {
		if err == nil {
			select {
			case <-dones[i]:
			case <-deadline:
				err = errors.New("transaction actors did not stop within 10s")
			}
		}
		c.o.Root.Stop(pid)
	}
	c.o.Repl.Unregister(replKey)
	return errors.Join(err, c.store.Close())
}
