package partition

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

	"github.com/regent-broker/regent/actors/internal/dispatch"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/logconfig"
)

// mailboxes runs every partition actor's mailbox on long-lived goroutines
// (see package dispatch); 64 parked workers cover the partitions a busy
// broker runs at once.
var mailboxes = dispatch.NewPool(300, 64)

// SyncPolicy says when appended data is fsynced.
type SyncPolicy int

const (
	// SyncInterval writes every append to the OS before acknowledging it
	// (so a process crash, kill -9 included, loses nothing acknowledged) and
	// fsyncs on the broker's flush interval (power loss may lose the tail).
	SyncInterval SyncPolicy = iota
	// SyncAlways fsyncs before acknowledging acks=all and acks=1 produces.
	SyncAlways
)

// Partition is the handle the protocol layer holds for one partition.
// Writes and admin changes go through the partition actor; reads go straight
// to the log, which is safe for concurrent readers.
type Partition struct {
	Topic string
	Index int32

	root *actor.RootContext
	pid  *actor.PID
	log  *storage.Log

	// view is the high watermark (the log end, since only committed
	// commands are applied: single node at once, raft once a quorum has
	// them), the last stable offset and the aborted transactions, as one
	// value so that no reader mixes two moments. Stored by the actor only.
	view atomic.Pointer[ReadView]

	waiters struct {
		sync.Mutex
		set map[*Waiter]struct{}
	}

	traffic traffic // clients' produce and fetch bytes (traffic.go)

	// guards are the markers proposed per producer (txn_guard.go).
	guards struct {
		sync.Mutex
		g txnGuards
	}
}

// Options configures a partition.
type Options struct {
	Dir   string
	Topic string
	Index int32
	// Config is the topic's resolved config.
	Config logconfig.Config
	Sync   SyncPolicy
	Epoch  int32
	Logger *slog.Logger
	// Repl orders the partition's state changes; nil means a private
	// replication.Local.
	Repl replication.Replicator
	// Budget, shared by the node's partitions, bounds the producer state
	// they hold together; nil: no bound.
	Budget *ProducerBudget
	// ReplKey is the key the partition's commands carry in Repl ("":
	// partition/TOPIC/INDEX). A partition raft group names the topic id
	// too, so that a command committed for a deleted topic can never
	// apply to a new topic of the same name.
	ReplKey string
	// syncLog, when set, stands in for the log's Sync (tests: slow and
	// failing fsyncs).
	syncLog func(*storage.Log) error
}

// replKeyOf is the key of o's commands (Options.ReplKey).
func replKeyOf(o Options) string {
	if o.ReplKey != "" {
		return o.ReplKey
	}
	return fmt.Sprintf("partition/%s/%d", o.Topic, o.Index)
}

// Open opens (recovering) the partition's log and spawns its actor.
func Open(root *actor.RootContext, o Options) (*Partition, error) {
	lg, err := storage.Open(o.Dir, storageOptions(o.Config, o.Sync))
	if err != nil {
		return nil, fmt.Errorf("open partition %s-%d: %w", o.Topic, o.Index, err)
	}
	// The log's newest epoch stands if it is newer than o.Epoch (in a
	// cluster, raft terms raised it); re-assigning an older epoch would
	// drop the newer entries.
	epoch := o.Epoch
	if latest := lg.LatestEpoch(); latest >= epoch {
		epoch = latest
	} else if err := lg.AssignEpoch(epoch, lg.NextOffset()); err != nil {
		_ = lg.Close()
		return nil, fmt.Errorf("partition %s-%d epoch: %w", o.Topic, o.Index, err)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("topic", o.Topic, "partition", o.Index)
	sl, err := openStateLog(lg, o.Config, epoch, filepath.Join(o.Dir, producerSnapshotFile), logger)
	if err != nil {
		_ = lg.Close()
		return nil, err
	}
	p := &Partition{Topic: o.Topic, Index: o.Index, root: root, log: lg}
	p.waiters.set = map[*Waiter]struct{}{}
	p.view.Store(sl.st.View())
	repl := o.Repl
	if repl == nil {
		repl = replication.NewLocal()
	}
	a := &partitionActor{p: p, sl: sl, sync: o.Sync, repl: repl, key: replKeyOf(o), logger: logger, budget: o.Budget}
	a.noteProducers()
	_, a.freeAtDone = repl.(replication.FreeAtDone)
	// Local applies a command inside Propose, on this goroutine: checking
	// before it would only check twice.
	_, local := repl.(*replication.Local)
	a.checkFirst = !local
	a.gc.syncLog = o.syncLog
	if a.gc.syncLog == nil {
		a.gc.syncLog = (*storage.Log).Sync
	}
	pid, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithDispatcher(mailboxes)), fmt.Sprintf("partition/%s/%d/%d", o.Topic, o.Index, time.Now().UnixNano()))
	if err != nil {
		_ = lg.Close()
		return nil, fmt.Errorf("spawn partition actor %s-%d: %w", o.Topic, o.Index, err)
	}
	p.pid = pid
	// Registered once the actor can take messages: raft may hand it
	// commands (ApplyAsync) as soon as it is registered.
	repl.Register(a.key, a)
	return p, nil
}

// producerSnapshotFile holds the partition's producer-state snapshot.
const producerSnapshotFile = "producer-state.json"

// storageOptions is StorageOptions for a partition syncing by policy: a
// log fsynced after every append reserves no blocks ahead (each fsync
// would then convert the reserved blocks it covers, which costs more than
// the reservation saves: storage/prealloc.go).
func storageOptions(c logconfig.Config, sync SyncPolicy) storage.Options {
	o := StorageOptions(c)
	o.NoReserve = sync == SyncAlways
	return o
}

// StorageOptions maps a topic config onto the log's options.
func StorageOptions(c logconfig.Config) storage.Options {
	return storage.Options{
		SegmentBytes:           c.SegmentBytes,
		SegmentMs:              c.SegmentMs,
		IndexIntervalBytes:     int(c.IndexIntervalBytes),
		RetentionMs:            c.RetentionMs,
		RetentionBytes:         c.RetentionBytes,
		Compact:                c.CleanupCompact,
		DeleteDisabled:         !c.CleanupDelete,
		DeleteRetentionMs:      c.DeleteRetentionMs,
		MinCompactionLagMs:     c.MinCompactionLagMs,
		MaxCompactionLagMs:     c.MaxCompactionLagMs,
		MinCleanableDirtyRatio: c.MinCleanableDirtyRatio,
	}
}

// Produce appends one partition's records. reply is called exactly once, on
// the actor's goroutine; it must not block.
func (p *Partition) Produce(records []byte, acks int16, reply func(ProduceResult)) {
	p.ProduceTraced(nil, records, acks, reply)
}

// ProduceTraced is Produce with the request's tracer (nil: untraced), which
// is told when the actor takes the records and when storage applies them.
func (p *Partition) ProduceTraced(tr Tracer, records []byte, acks int16, reply func(ProduceResult)) {
	m := &produceMsg{records: records, acks: acks, reply: reply, tr: tr}
	if tr != nil {
		m.sent = time.Now()
	}
	p.root.Send(p.pid, m)
}

// WriteTxnMarker ends the producer's open transaction on this partition
// with a COMMIT or ABORT control batch (nothing is written, and the answer
// is success, when it has none open). reply runs on the actor goroutine and
// must not block.
func (p *Partition) WriteTxnMarker(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, reply func(err error)) {
	p.WriteTxnMarkerTraced(nil, producerID, producerEpoch, commit, coordinatorEpoch, reply)
}

// WriteTxnMarkerTraced is WriteTxnMarker with the request's tracer (nil:
// untraced).
func (p *Partition) WriteTxnMarkerTraced(tr Tracer, producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, reply func(err error)) {
	m := &markerMsg{pid: producerID, epoch: producerEpoch, commit: commit, coordinatorEpoch: coordinatorEpoch, reply: reply, tr: tr}
	if tr != nil {
		m.sent = time.Now()
	}
	p.root.Send(p.pid, m)
}

// Tracer follows the partition actor's part of one traced request (the
// telemetry adapter implements it; nil means untraced and costs nothing).
// Work may be called from several partition actors at once.
type Tracer interface {
	// Work is called on the actor goroutine when the actor takes the
	// request's message. It returns the handle for that work, or nil.
	Work(w Work) WorkTrace
}

// Work describes one message a partition actor takes for a request.
type Work struct {
	Op        string // "produce" or "txn_marker"
	Topic     string
	Partition int32
	// Records is the produce's record set (nil for markers). It may be
	// read only until Work returns: the actor patches it in place later.
	Records []byte
	Sent    time.Time // when the message was sent to the actor
}

// WorkTrace follows one message through the actor. Its methods are called
// on the actor goroutine, in order: StorageStart, StorageDone, Done.
type WorkTrace interface {
	// StorageStart is called when the actor proposes the change to the
	// replicator (the local log, or raft in cluster mode).
	StorageStart()
	// StorageDone is called when the change is applied (and, with
	// SyncAlways, fsynced).
	StorageDone()
	// Done is called before the reply: baseOffset is the first offset
	// written (-1: none), err Kafka's error or nil.
	Done(baseOffset int64, err error)
}

// View returns the partition's read view as of the latest change: a
// fetch takes its high watermark, last stable offset and aborted
// transactions from one view. Any goroutine; the view is never modified.
func (p *Partition) View() *ReadView { return p.view.Load() }

// LastStableOffset is the offset below which no transaction is open: the
// limit of read_committed fetches. A fetch needing the aborted
// transactions too must take both from one View.
func (p *Partition) LastStableOffset() int64 { return p.view.Load().LastStable }

// AbortedTransactions lists the aborted transactions whose records may lie
// in [from, to), from the latest view. A fetch must not pair it with a
// LastStableOffset read at another moment: it takes both from one View.
func (p *Partition) AbortedTransactions(from, to int64) []AbortedTxn {
	return p.view.Load().AbortedIn(from, to)
}

// OpenTransactions lists the open transactions. It waits for the actor:
// never call it on the event loop.
func (p *Partition) OpenTransactions() []OpenTxn { return p.inspect().open }

// Producers lists every producer's state. It waits for the actor: never
// call it on the event loop.
func (p *Partition) Producers() []ProducerInfo { return p.inspect().producers }

func (p *Partition) inspect() inspectResult {
	done := make(chan inspectResult, 1)
	p.root.Send(p.pid, &inspectMsg{done: done})
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		return inspectResult{}
	}
}

// DeleteRecords moves the log start offset to offset (-1: the high
// watermark).
func (p *Partition) DeleteRecords(offset int64, reply func(lowWatermark int64, err error)) {
	p.root.Send(p.pid, &deleteRecordsMsg{offset: offset, reply: reply})
}

// SetConfig applies a new topic config.
func (p *Partition) SetConfig(c logconfig.Config) {
	p.root.Send(p.pid, &setConfigMsg{cfg: c})
}

// Maintain runs log maintenance once (sent by the broker's ticker). With
// leader (single node: always; cluster: the raft leader) the partition
// evaluates retention and compaction on its log and clock and proposes the
// new log start (see deleteRecordsCmd) and the compaction pass (see
// compactCmd), which every node applies; without, it leaves both to the
// leader's proposals. Either way it snapshots producer state.
func (p *Partition) Maintain(leader bool) { p.root.Send(p.pid, &maintainMsg{leader: leader}) }

// CheckCompaction has the leader's actor propose the compaction pass the
// log is due for, if any (the compaction part of Maintain alone).
func (p *Partition) CheckCompaction() { p.root.Send(p.pid, compactCheckMsg{}) }

// Sync fsyncs the log (the flush interval's tick).
//
// A log with nothing to write back or fsync (storage.Log.Dirty) is
// skipped: the broker calls Sync on every partition each flush interval,
// and a message round trip per idle partition per second kept an idle
// broker with 100,000 partitions at 1.8 cores (allocations, and the
// collector scanning every partition's syncer stack).
func (p *Partition) Sync() {
	if !p.log.Dirty() {
		return
	}
	p.root.Send(p.pid, &syncMsg{})
}

// Close stops the actor and closes the log; with remove, the partition's
// directory is deleted. It waits for the actor to finish what it holds.
func (p *Partition) Close(remove bool) error {
	done := make(chan error, 1)
	p.root.Send(p.pid, &closeMsg{remove: remove, done: done})
	err := <-done
	// A poison pill, not Stop: messages already queued (commands raft
	// handed over, answers to proposals) are still taken and answered.
	p.root.Poison(p.pid)
	p.wakeWaiters()
	return err
}

// HighWatermark is the offset up to which consumers may read.
func (p *Partition) HighWatermark() int64 { return p.view.Load().HighWatermark }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.StartOffset() }

// Log exposes the read side of the log (Read, OffsetForTimestamp, ...).
func (p *Partition) Log() *storage.Log { return p.log }

// Read returns whole batches from offset, never past the high watermark.
func (p *Partition) Read(offset int64, maxBytes int, strictMax bool) ([]byte, error) {
	b, err := p.log.Read(offset, maxBytes, strictMax)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Waiter is a long-polling fetch parked on partitions. C receives a value
// when any partition it waits on gets new data.
type Waiter struct{ C chan struct{} }

// NewWaiter makes a waiter.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

// AddWaiter parks w until the next append.
func (p *Partition) AddWaiter(w *Waiter) {
	p.waiters.Lock()
	p.waiters.set[w] = struct{}{}
	p.waiters.Unlock()
}

// RemoveWaiter unparks w.
func (p *Partition) RemoveWaiter(w *Waiter) {
	p.waiters.Lock()
	delete(p.waiters.set, w)
	p.waiters.Unlock()
}

func (p *Partition) wakeWaiters() {
	p.waiters.Lock()
	for w := range p.waiters.set {
		select {
		case w.C <- struct{}{}:
		default:
		}
	}
	p.waiters.Unlock()
}

// The request messages also carry their proposal (command and answer), so
// that proposing allocates only done's closures. The fields the actor sets
// are the actor goroutine's; the answer is written by done before it sends
// the message back, and read by the actor when that message arrives.

type produceMsg struct {
	records []byte
	acks    int16
	reply   func(ProduceResult)
	tr      Tracer    // nil: untraced
	sent    time.Time // set only when traced
	// guarded: a transactional batch checked by a coordinator on another
	// node, appended only if no marker of guardPID was proposed since
	// guard (txn_guard.go).
	guarded    bool
	guardPID   int64
	guardEpoch int16
	guard      uint64
	// needCheck: a ProduceOrCheck batch (of guardPID at guardEpoch),
	// handed to needCheck unless its transaction is known open here.
	needCheck func(guard uint64)
	// Set by the actor.
	wt  WorkTrace
	cmd appendCmd
	ans answer[ProduceResult]
	res ProduceResult // the outcome while the answer waits for a sync
	// early: answered before the replicator's done (closed, or Propose
	// panicked).
	early bool
}

type deleteRecordsMsg struct {
	offset int64
	reply  func(int64, error)
	// Set by the actor.
	cmd deleteRecordsCmd
	ans answer[deleteRecordsResult]
}

type markerMsg struct {
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
	reply            func(error)
	tr               Tracer    // nil: untraced
	sent             time.Time // set only when traced
	// Set by the actor.
	wt  WorkTrace
	cmd markerCmd
	ans answer[MarkerResult]
	err error // the outcome while the answer waits for a sync
}

// The late answers: a request message sent back to the actor once the
// replicator answered its proposal (a distinct type, the same memory).
type (
	producedMsg       produceMsg
	markedMsg         markerMsg
	recordsDeletedMsg deleteRecordsMsg
)

type inspectMsg struct{ done chan inspectResult }
type inspectResult struct {
	open      []OpenTxn
	producers []ProducerInfo
}

type setConfigMsg struct{ cfg logconfig.Config }
type maintainMsg struct{ leader bool }

// compactCheckMsg is sent on the leader only (see CheckCompaction).
type compactCheckMsg struct{}
type syncMsg struct{}
type closeMsg struct {
	remove bool
	done   chan error
}

// partitionActor serializes every change to one partition. Its fields are
// owned by the actor's goroutine, except gate (any goroutine, under its
// lock) and the fields set in Open and never changed (p, sync, repl, key,
// logger), which replicator goroutines read to send to the actor.
type partitionActor struct {
	p *Partition
	// sl holds the partition's State and performs its effects on p.log.
	sl     *stateLog
	sync   SyncPolicy
	repl   replication.Replicator
	key    string // the replicator key of this partition
	closed bool
	logger *slog.Logger
	// inflight holds the requests whose proposal has not been answered
	// yet.
	inflight map[pending]struct{}
	gate     gate
	// retaining is set by the actor when it proposes a retention move and
	// cleared by that proposal's done (any goroutine): one at a time, so a
	// slow commit is not answered by a pile of identical proposals.
	retaining atomic.Bool
	// compacting is retaining's twin for compaction passes: a pass is
	// planned from the log's clean point, which moves only when the last
	// pass is applied.
	compacting atomic.Bool
	// expiring is retaining's twin for producer-expiry passes (expire.go).
	expiring atomic.Bool
	// evicting is its twin for producer-eviction passes (evict.go).
	evicting atomic.Bool
	// budget (set in Open, shared by the node's partitions) bounds the
	// producer state; held is what this partition last counted into it.
	budget *ProducerBudget
	held   int
	// gc is the syncer's state (syncer.go): group commit with SyncAlways,
	// the periodic fsync in either mode. The actor's, like the fields above.
	gc groupCommit
	// freeAtDone: repl has stopped reading a command when it calls the
	// command's done, so a produce answered from done can tell the caller
	// its records are free (ProduceResult.RecordsFree). Set at spawn.
	freeAtDone bool
	// checkFirst: produces are checked before they are proposed (and
	// replicated as checked while appendsChecked allows), as the
	// replicator applies them on other nodes too. Set at spawn.
	checkFirst bool
}

func (a *partitionActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *produceMsg:
		a.produce(m)
	case *deleteRecordsMsg:
		a.deleteRecords(m)
	case *markerMsg:
		a.writeMarker(m)
	case *checkAbandonedMsg:
		a.checkDone(m.pid)
	case *inspectMsg:
		if a.closed {
			m.done <- inspectResult{}
			return
		}
		m.done <- inspectResult{open: a.sl.st.OpenTxns(), producers: a.sl.st.ProducerInfos()}
	case *setConfigMsg:
		if !a.closed {
			a.sl.st.SetConfig(m.cfg)
			a.p.log.SetOptions(storageOptions(m.cfg, a.sync))
		}
	case *maintainMsg:
		a.maintain(m.leader)
	case compactCheckMsg:
		if !a.closed {
			a.proposeCompaction(time.Now())
		}
	case *syncMsg:
		// Through the syncer, in either mode: a Sync here would hold every
		// append of the partition for the fsync's length, and an interval
		// fsync writes back a second of appends.
		if !a.closed {
			a.gc.wanted = true
			a.startSync()
		}
	case syncedMsg:
		a.synced()
	case *applyMsg:
		a.applyCommitted(m)
	case *producedMsg:
		a.answered((*produceMsg)(m))
	case *markedMsg:
		a.answered((*markerMsg)(m))
	case *recordsDeletedMsg:
		a.answered((*deleteRecordsMsg)(m))
	case *closeMsg:
		m.done <- a.close(m.remove)
	}
}

func (a *partitionActor) produce(m *produceMsg) {
	if m.guarded {
		// A check ProduceOrCheck asked for is over, whatever follows.
		a.checkDone(m.guardPID)
	}
	if m.needCheck != nil && !a.closed {
		if guard, check := a.needsCheck(m); check {
			m.needCheck(guard)
			return
		}
	}
	if m.tr != nil {
		m.wt = m.tr.Work(Work{Op: "produce", Topic: a.p.Topic, Partition: a.p.Index, Records: m.records, Sent: m.sent})
	}
	if a.closed {
		if m.wt != nil {
			m.wt.Done(-1, kerr.NotLeaderForPartition)
		}
		m.reply(ProduceResult{Err: kerr.NotLeaderForPartition, BaseOffset: -1, LogAppendTime: -1, RecordsFree: true})
		return
	}
	if m.wt != nil {
		m.wt.StorageStart()
	}
	// In a cluster the records are checked once, here: a refused produce
	// is answered without a round of replication, and the nodes that
	// apply it skip the CRC and per-record checks. Until every node can
	// read such a command (appendsChecked), each checks at apply, as a
	// single node does.
	now := time.Now().UnixNano()
	checked := a.checkFirst && appendsChecked()
	if checked {
		if res := a.sl.st.CheckProduce(m.records, time.Unix(0, now).UnixMilli()); res.Err != nil {
			if m.wt != nil {
				m.wt.StorageDone()
				m.wt.Done(-1, res.Err)
			}
			res.RecordsFree = true
			m.reply(res)
			return
		}
	}
	if !a.guardHolds(m) {
		if m.wt != nil {
			m.wt.StorageDone()
			m.wt.Done(-1, kerr.InvalidTxnState)
		}
		m.reply(guardFailed(m.guardPID))
		return
	}
	// Over the producer budget, room is made before the batch that may
	// add one more.
	a.proposeEviction()
	a.txnProposed(m)
	m.cmd = appendCmd{records: m.records, now: now, checked: checked}
	propose(a, m, traced(&m.cmd, m.wt), &m.ans, (*producedMsg)(m))
}

// finish implements pending: the produce's records are applied (or not).
// With SyncAlways an acks=1/all success is answered once a sync that
// started after now has succeeded (syncer.go).
func (m *produceMsg) finish(a *partitionActor, failed error) {
	if failed != nil {
		// m.ans is not read: a late done may still be writing it.
		m.early = true
		m.res = produceOutcome(ProduceResult{}, failed)
	} else {
		m.res = produceOutcome(m.ans.res, m.ans.err)
	}
	a.syncAfter(m, m.res.Err == nil && m.acks != 0, m.res.BaseOffset)
}

// synced implements syncWaiter: the produce is answered.
func (m *produceMsg) synced(a *partitionActor, serr error) {
	res := m.res
	if serr != nil {
		res = ProduceResult{Err: kerr.KafkaStorageError, ErrMessage: serr.Error(), BaseOffset: -1, LogAppendTime: -1}
	}
	// Answered before done (the actor closed, or Propose panicked), the
	// replicator may still be reading the records.
	res.RecordsFree = a.freeAtDone && !m.early
	if m.wt != nil {
		m.wt.StorageDone()
		m.wt.Done(res.BaseOffset, res.Err)
	}
	m.reply(res)
}

// publish makes the state readers see current: high watermark, last
// stable offset and aborted transactions, in one store (see ReadView);
// parked fetches wake on a change. With SyncAlways the view goes out only
// once a sync that started after it was taken has succeeded (syncer.go).
func (a *partitionActor) publish() {
	if a.sync == SyncAlways {
		a.publishSynced()
		a.startSync()
		return
	}
	a.store(a.sl.st.View())
}

// store publishes v unless readers see the same already. Actor goroutine.
func (a *partitionActor) store(v *ReadView) {
	if v.sameAs(a.p.view.Load()) {
		return
	}
	a.p.view.Store(v)
	a.p.wakeWaiters()
}

func (a *partitionActor) writeMarker(m *markerMsg) {
	if m.tr != nil {
		m.wt = m.tr.Work(Work{Op: "txn_marker", Topic: a.p.Topic, Partition: a.p.Index, Sent: m.sent})
	}
	if a.closed {
		if m.wt != nil {
			m.wt.Done(-1, kerr.NotLeaderForPartition)
		}
		m.reply(kerr.NotLeaderForPartition)
		return
	}
	if m.wt != nil {
		m.wt.StorageStart()
	}
	a.markerProposed(m.pid)
	m.cmd = markerCmd{pid: m.pid, epoch: m.epoch, commit: m.commit, coordinatorEpoch: m.coordinatorEpoch, now: time.Now().UnixNano()}
	propose(a, m, traced(&m.cmd, m.wt), &m.ans, (*markedMsg)(m))
}

// finish implements pending: the marker is written (or not). With
// SyncAlways a written marker is answered once a sync that started after
// now has succeeded (syncer.go).
func (m *markerMsg) finish(a *partitionActor, failed error) {
	offset := int64(-1)
	if failed != nil {
		m.err = markerOutcome(MarkerResult{}, failed)
	} else {
		m.err = markerOutcome(m.ans.res, m.ans.err)
		offset = m.ans.res.Offset
	}
	a.syncAfter(m, m.err == nil, offset)
}

// synced implements syncWaiter: the marker is answered.
func (m *markerMsg) synced(_ *partitionActor, serr error) {
	err := m.err
	if serr != nil {
		err = fmt.Errorf("%w: fsync after marker: %w", kerr.KafkaStorageError, serr)
	}
	if m.wt != nil {
		m.wt.StorageDone()
		m.wt.Done(-1, err)
	}
	m.reply(err)
}

func (a *partitionActor) deleteRecords(m *deleteRecordsMsg) {
	if a.closed {
		m.reply(-1, kerr.NotLeaderForPartition)
		return
	}
	off := m.offset
	hw := a.p.view.Load().HighWatermark
	if off == -1 {
		off = hw
	}
	if off < 0 || off > hw {
		m.reply(-1, kerr.OffsetOutOfRange)
		return
	}
	m.cmd = deleteRecordsCmd{offset: off}
	propose(a, m, &m.cmd, &m.ans, (*recordsDeletedMsg)(m))
}

// finish implements pending: the log start moved (or not).
func (m *deleteRecordsMsg) finish(_ *partitionActor, failed error) {
	if failed != nil {
		m.reply(deleteOutcome(deleteRecordsResult{}, failed))
		return
	}
	m.reply(deleteOutcome(m.ans.res, m.ans.err))
}

func (a *partitionActor) maintain(leader bool) {
	if a.closed {
		return
	}
	if leader {
		now := time.Now()
		a.proposeRetention(now)
		a.proposeCompaction(now)
		a.proposeExpiry(now)
		a.proposeEviction()
	}
	a.snapshot()
}

// proposeCompaction proposes the compaction pass the log is due for at now,
// if any (see compactCmd). With Local it is applied inside Propose, on this
// goroutine; with raft, when committed, on every node.
func (a *partitionActor) proposeCompaction(now time.Time) {
	if a.compacting.Load() {
		return
	}
	p, ok := a.planCompaction(now.UnixMilli())
	if !ok {
		return
	}
	cmd := &compactCmd{dirtyStart: p.DirtyStart, end: p.End, now: now.UnixNano(), deleteRetentionMs: p.DeleteRetentionMs}
	a.compacting.Store(true)
	defer func() {
		// Local applies inside Propose: a panic there must not take the
		// actor's message loop with it.
		if r := recover(); r != nil {
			a.compacting.Store(false)
			a.logger.Error("compaction proposal panicked", "end", p.End, "panic", r)
		}
	}()
	replication.Propose(a.repl, a.key, cmd, func(r compactResult, err error) {
		a.compacting.Store(false)
		if err == nil {
			err = r.err
		}
		switch {
		case errors.Is(err, replication.ErrNotLeader):
			a.logger.Debug("compaction proposal refused", "end", p.End, "err", err)
		case err != nil:
			a.logger.Warn("compaction proposal failed", "end", p.End, "err", err)
		default:
			a.logger.Debug("compaction applied", "dirty_start", p.DirtyStart, "end", p.End)
		}
	})
}

// proposeRetention evaluates retention against now and proposes the log
// start it calls for. The replicator applies it on every node (Local: here,
// at once) as a DeleteRecords: nothing is deleted before it is committed.
func (a *partitionActor) proposeRetention(now time.Time) {
	if a.retaining.Load() {
		return
	}
	off, ok := a.p.log.RetentionOffset(now.UnixMilli())
	if !ok {
		return
	}
	cmd := &deleteRecordsCmd{offset: off, retain: true, now: now.UnixNano()}
	a.retaining.Store(true)
	defer func() {
		// Local applies inside Propose: a panic there must not take the
		// actor's message loop with it.
		if r := recover(); r != nil {
			a.retaining.Store(false)
			a.logger.Error("retention proposal panicked", "offset", off, "panic", r)
		}
	}()
	replication.Propose(a.repl, a.key, cmd, func(r deleteRecordsResult, err error) {
		a.retaining.Store(false)
		low, err := deleteOutcome(r, err)
		switch {
		case errors.Is(err, replication.ErrNotLeader):
			// Leadership moved: the next leader evaluates retention.
			a.logger.Debug("retention proposal refused", "offset", off, "err", err)
		case err != nil:
			a.logger.Warn("retention proposal failed", "offset", off, "err", err)
		default:
			a.logger.Info("retention moved the log start", "log_start_offset", low)
		}
	})
}

// snapshot saves producer state so that a restart replays only the log
// written since; a failure costs only a longer replay.
func (a *partitionActor) snapshot() {
	if err := a.sl.snapshot(); err != nil {
		a.logger.Warn("producer-state snapshot failed", "err", err)
	}
}

func (a *partitionActor) close(remove bool) error {
	if a.closed {
		return nil
	}
	a.closed = true
	a.repl.Unregister(a.key)
	// Closed, its producers hold no memory of the node's budget.
	a.budget.moved(a.held, 0)
	a.held = 0
	a.gate.Lock()
	a.gate.closed = true
	a.gate.Unlock()
	// Their answers may never come (or come to a closed actor): answer
	// them now, while the log is open.
	a.abortInFlight()
	// Then the answers waiting for a sync, after the sync in flight and
	// one more. Also on remove: they were appended, and their producers
	// are owed an answer that says whether the bytes were durable.
	serr := a.drainSyncs(remove)
	if remove {
		return a.p.log.Delete()
	}
	if serr != nil {
		_ = a.p.log.Close()
		return serr
	}
	a.snapshot()
	return a.p.log.Close()
}

// traceParenter is a WorkTrace that can name its storage span, so the
// replicator carries it and every node's apply joins the request's trace.
type traceParenter interface{ TraceParent() string }

// traced wraps cmd with wt's trace context, when there is one.
func traced(cmd replication.Command, wt WorkTrace) replication.Command {
	if tp, ok := wt.(traceParenter); ok {
		return replication.WithTrace(cmd, tp.TraceParent())
	}
	return cmd
}
