package txn

// The transaction actor: a thin shell around one transactional id's Txn.
// It runs the pure steps, persists their result before adopting it or
// answering, writes markers when a transaction prepares, and keeps one
// timer: the open transaction's deadline or the idle id's expiry.

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/replication"
)

// Result is the answer to a coordinator request.
type Result struct {
	// Err is a *kerr.Error (possibly wrapped), or nil.
	Err error
	// ProducerID and ProducerEpoch: InitProducerId, EndTxn v5.
	ProducerID    int64
	ProducerEpoch int16
	// Partitions: VerifyPartitions' answer per partition (when Err is nil).
	Partitions []error
}

func errResult(err error) Result { return Result{Err: err, ProducerID: -1, ProducerEpoch: -1} }

// request is a message that carries a reply.
type request interface {
	// failWith answers the request with err.
	failWith(err error)
}

type (
	initMsg struct {
		in    InitInput
		reply func(Result)
	}
	addMsg struct {
		in     AddInput
		verify bool
		reply  func(Result)
	}
	offsetsMsg struct {
		req *kmsg.TxnOffsetCommitRequest
		// checkOnly: check (and v5: add the group), stage nothing.
		checkOnly bool
		reply     func(*kmsg.TxnOffsetCommitResponse, error)
	}
	endMsg struct {
		in    EndInput
		reply func(Result)
	}
	describeMsg struct{ reply func(*Txn, error) }
	// appendMsg is a transactional batch waiting for its partition to
	// be checked (or added) before it is handed on.
	appendMsg struct {
		in       AddInput
		add      bool
		appendFn func()
		refuse   func(error)
	}

	// timerMsg is the deadline or expiry timer firing; epoch is the
	// epoch a deadline was armed for.
	timerMsg struct {
		deadline bool
		epoch    int16
	}
	// markerMsg is one marker's (or group completion's) outcome.
	markerMsg struct {
		gen    uint64
		target markerTarget
		err    error
	}
	retryMarkersMsg struct{ gen uint64 }
	retireMsg       struct{}
	closeMsg        struct{ done chan struct{} }
)

func (m *initMsg) failWith(err error)     { m.reply(errResult(err)) }
func (m *addMsg) failWith(err error)      { m.reply(errResult(err)) }
func (m *offsetsMsg) failWith(err error)  { m.reply(nil, err) }
func (m *endMsg) failWith(err error)      { m.reply(errResult(err)) }
func (m *describeMsg) failWith(err error) { m.reply(nil, err) }
func (m *appendMsg) failWith(err error)   { m.refuse(err) }

// markerTarget is a partition or a group that a marker goes to.
type markerTarget struct {
	tp    TopicPartition
	group string // set: a group's offsets, not a partition
}

func (t markerTarget) String() string {
	if t.group != "" {
		return "group " + t.group
	}
	return fmt.Sprintf("%s-%d", t.tp.Topic, t.tp.Partition)
}

// txnActor owns one id's state. Every field is touched only on the actor's
// goroutine (timer callbacks and marker replies only send messages).
type txnActor struct {
	c  *Coordinator
	id string
	t  *Txn // nil: the id has no state
	// stop is the activation's (Coordinator.mu.stop): closed, persists
	// give up, as the actor is being stopped.
	stop <-chan struct{}
	// epoch is the activation's coordinator epoch, in every marker.
	epoch  int32
	self   *actor.PID
	logger *slog.Logger

	// marking is the markers in flight for the preparing state.
	marking struct {
		gen uint64
		set markerSet
		// completing: every marker is written, and persisting the
		// completed state failed; the retry completes again.
		completing bool
		attempt    int
		// answered: the waiters were told the outcome (a marker
		// failed; the durable decision stands and retries go on).
		answered bool
	}
	// waiters are EndTxn answers held until the markers are written.
	waiters []func(Result)
	timer   *time.Timer
	timerAt int64
	retry   *time.Timer

	// retired: the coordinator forgot this actor (the id expired);
	// requests that still arrive are handed back for a new actor.
	retired bool
	closed  bool
}

func (a *txnActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		a.resume()
	case request:
		if a.retired {
			a.c.dispatch(a.id, m)
			return
		}
		if a.closed {
			m.failWith(kerr.NotCoordinator)
			return
		}
		a.guard(m, func() { a.serve(m) })
		if a.t == nil && !a.retired {
			// Spawned for a request that created nothing (a refused
			// InitProducerId): no state to keep an actor for.
			a.retired = true
			a.c.retire(a.id, a.self)
		}
	case *timerMsg:
		if !a.retired && !a.closed {
			a.guard(nil, func() { a.fire(m) })
		}
	case *markerMsg:
		if !a.retired && !a.closed && m.gen == a.marking.gen {
			a.guard(nil, func() { a.markerDone(m) })
		}
	case *retryMarkersMsg:
		if !a.retired && !a.closed && m.gen == a.marking.gen {
			a.guard(nil, a.resendFailed)
		}
	case *evictMsg:
		if !a.retired && !a.closed {
			a.guard(nil, func() { a.evict(m) })
		}
		a.c.evictDone(a.id)
	case *retireMsg:
		ctx.Stop(ctx.Self())
	case *closeMsg:
		a.shutdown()
		close(m.done)
	}
	switch ctx.Message().(type) {
	case *actor.Started, *retireMsg, *closeMsg:
		// A woken actor first serves what woke it (rest.go).
	default:
		a.maybeRest()
	}
}

// guard runs fn, turning a panic into an answer (a panic in Receive would
// lose the message). Steps never change a.t before it is persisted, so the
// state is still the last persisted one.
func (a *txnActor) guard(m request, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			a.logger.Error("transaction step panicked", "panic", p, "stack", string(debug.Stack()))
			if m != nil {
				m.failWith(kerr.UnknownServerError)
			}
		}
	}()
	fn()
}

func (a *txnActor) nowMs() int64 { return a.c.o.Now().UnixMilli() }

func (a *txnActor) serve(m request) {
	now := a.nowMs()
	switch m := m.(type) {
	case *initMsg:
		st := InitProducerID(a.t, m.in, now, a.c.cfg, a.c.o.NextProducerID)
		if err := a.apply(st); err != nil {
			m.reply(errResult(err))
			return
		}
		m.reply(Result{Err: st.Err, ProducerID: st.ProducerID, ProducerEpoch: st.ProducerEpoch})
	case *addMsg:
		if m.verify {
			parts, err := VerifyPartitions(a.t, m.in.ProducerID, m.in.Epoch, m.in.Partitions)
			m.reply(Result{Err: err, ProducerID: -1, ProducerEpoch: -1, Partitions: parts})
			return
		}
		st := Add(a.t, m.in, now)
		if err := a.apply(st); err != nil {
			m.reply(errResult(err))
			return
		}
		m.reply(Result{Err: st.Err, ProducerID: st.ProducerID, ProducerEpoch: st.ProducerEpoch})
	case *offsetsMsg:
		a.commitOffsets(m, now)
	case *appendMsg:
		a.append(m, now)
	case *endMsg:
		if m.in.TV2 {
			a.c.stats.endTxnV5.Add(1)
			if m.in.Epoch == 0 {
				// A new producer id's first transaction only: the epoch
				// rises at every TV2 end (an idle id's actor rests, so a
				// flag of the actor's would log every transaction).
				a.logger.Info("transactional id runs transaction version 2 (EndTxn v5: the epoch is bumped on every commit and abort)", "producer_id", m.in.ProducerID, "epoch", m.in.Epoch)
			}
		}
		st := EndTxn(a.t, m.in, now, a.c.o.NextProducerID)
		res := Result{Err: st.Err, ProducerID: st.ProducerID, ProducerEpoch: st.ProducerEpoch}
		if st.Err == nil && st.AwaitMarkers {
			// Held until the markers are written (or one fails: the
			// decision is durable either way).
			a.waiters = append(a.waiters, func(r Result) {
				if r.Err != nil {
					res = errResult(r.Err)
				}
				m.reply(res)
			})
		}
		if err := a.apply(st); err != nil {
			a.answerWaiters(errResult(err))
			if !st.AwaitMarkers {
				m.reply(errResult(err))
			}
			return
		}
		if !st.AwaitMarkers || st.Err != nil {
			m.reply(res)
		}
	case *describeMsg:
		if !a.t.live() {
			m.reply(nil, kerr.TransactionalIDNotFound)
			return
		}
		m.reply(a.t.clone(), nil)
	}
}

// append checks (or adds) a transactional batch's partition and hands the
// batch on from this goroutine, before any marker this actor sends later.
func (a *txnActor) append(m *appendMsg, now int64) {
	st := AppendCheck(a.t, m.in, m.add, now)
	if err := a.apply(st); err != nil {
		m.refuse(err)
		return
	}
	if st.Err != nil {
		if errors.Is(st.Err, kerr.InvalidTxnState) {
			a.c.stats.verifyRefused.Add(1)
		}
		m.refuse(st.Err)
		return
	}
	if st.Next != nil {
		a.c.stats.implicitAdds.Add(1)
	}
	m.appendFn()
}

// commitOffsets checks a TxnOffsetCommit against the transaction (v5:
// adds the group to it, KIP-890 part 2) and hands it to the group side.
// It is sent from this goroutine so that it reaches the group before any
// completion this transaction sends later.
func (a *txnActor) commitOffsets(m *offsetsMsg, now int64) {
	sink := a.c.o.Offsets
	if sink == nil {
		m.reply(nil, kerr.CoordinatorNotAvailable)
		return
	}
	req := m.req
	if req.Version >= 5 {
		st := Add(a.t, AddInput{ProducerID: req.ProducerID, Epoch: req.ProducerEpoch, Groups: []string{req.Group}, TV2: true}, now)
		if err := a.apply(st); err != nil {
			m.reply(nil, err)
			return
		}
		if st.Err != nil {
			m.reply(nil, st.Err)
			return
		}
	} else if err := VerifyGroup(a.t, req.ProducerID, req.ProducerEpoch, req.Group); err != nil {
		m.reply(nil, err)
		return
	}
	if m.checkOnly {
		// The group's coordinator, on another node, stages the offsets
		// itself (its guard keeps them from landing after this
		// transaction's completion).
		m.reply(kmsg.NewPtrTxnOffsetCommitResponse(), nil)
		return
	}
	sink.TxnCommitOffsets(req, func(resp *kmsg.TxnOffsetCommitResponse) { m.reply(resp, nil) })
}

// apply persists st.Next (if any) and adopts it. A write error (a failed
// write, a proposal that met a deposed raft leader, a deactivation) is
// mapped to NOT_COORDINATOR, so the client goes to find the coordinator,
// and the state stays as it was.
func (a *txnActor) apply(st Step) error {
	if st.Next == nil {
		return nil
	}
	if err := a.c.persist(st.Next, a.stop); err != nil {
		if errors.Is(err, replication.ErrNotLeader) || errors.Is(err, errDeactivated) {
			// Expected while leadership moves.
			a.logger.Warn("persist transaction state: leadership moved", "state", st.Next.State, "err", err)
		} else {
			a.logger.Error("persist transaction state", "state", st.Next.State, "err", err)
		}
		return fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
	}
	prev := a.t
	a.adopt(st.Next)
	if a.t.State.preparing() && (prev == nil || !prev.State.preparing()) {
		a.startMarkers()
	}
	return nil
}

// adopt makes next the state (it is durable), publishes it and rearms the
// timer; a Dead id retires the actor.
func (a *txnActor) adopt(next *Txn) {
	if a.t != nil && (a.t.State != next.State || a.t.ProducerEpoch != next.ProducerEpoch) {
		a.logger.Debug("transaction state", "from", a.t.State, "to", next.State, "producer_id", next.ProducerID, "epoch", next.ProducerEpoch)
	}
	a.t = next
	a.c.publish(a.id, a.self, next)
	if next.State == StateDead {
		a.stopTimers()
		a.answerWaiters(errResult(kerr.InvalidProducerIDMapping))
		a.retired = true
		a.c.retire(a.id, a.self)
		return
	}
	a.armTimer()
}

// resume runs when the actor starts: a loaded transaction that was
// preparing gets its markers again; timers are armed.
func (a *txnActor) resume() {
	if a.t == nil {
		return
	}
	a.c.publish(a.id, a.self, a.t)
	a.armTimer()
	if a.t.State.preparing() {
		a.logger.Info("completing a transaction found preparing", "state", a.t.State, "producer_id", a.t.ProducerID, "epoch", a.t.ProducerEpoch, "partitions", len(a.t.Partitions))
		a.startMarkers()
	}
}

func (a *txnActor) fire(m *timerMsg) {
	a.timer, a.timerAt = nil, 0
	now := a.nowMs()
	var st Step
	if m.deadline {
		st = Timeout(a.t, m.epoch, now)
		if st.Next != nil {
			a.logger.Info("transaction timed out; aborting and fencing its producer", "producer_id", a.t.ProducerID, "epoch", a.t.ProducerEpoch, "timeout_ms", a.t.TimeoutMs)
		}
	} else {
		st = Expire(a.t, now, a.c.cfg)
		if st.Next != nil {
			a.logger.Info("transactional id expired", "idle_since", time.UnixMilli(a.t.LastUpdateMs))
		}
	}
	if st.Next == nil {
		a.armTimer()
		return
	}
	if err := a.apply(st); err != nil {
		// Try again shortly: the deadline has passed.
		a.armAt(now + 1000)
	}
}

// armTimer sets the one timer to the state's next deadline or expiry.
func (a *txnActor) armTimer() {
	if a.t == nil {
		a.stopTimer()
		return
	}
	if _, at, ok := a.t.Deadline(); ok {
		a.armAt(at)
		return
	}
	if at, ok := a.t.ExpiresAt(a.c.cfg); ok {
		a.armAt(at)
		return
	}
	a.stopTimer()
}

func (a *txnActor) armAt(at int64) {
	if a.timer != nil && a.timerAt == at {
		return
	}
	a.stopTimer()
	msg := &timerMsg{}
	if e, dl, ok := a.t.Deadline(); ok && dl == at {
		msg.deadline, msg.epoch = true, e
	} else if a.t.State == StateOngoing {
		// A failed timeout abort being retried.
		msg.deadline, msg.epoch = true, a.t.ProducerEpoch
	}
	self, root := a.self, a.c.o.Root
	delay := time.Duration(at-a.nowMs()) * time.Millisecond
	a.timer = time.AfterFunc(max(delay, 0), func() { root.Send(self, msg) })
	a.timerAt = at
}

func (a *txnActor) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	a.timerAt = 0
}

func (a *txnActor) stopTimers() {
	a.stopTimer()
	if a.retry != nil {
		a.retry.Stop()
		a.retry = nil
	}
}

func (a *txnActor) answerWaiters(r Result) {
	ws := a.waiters
	a.waiters = nil
	for _, w := range ws {
		w(r)
	}
}

// shutdown answers what waits: the broker is going away. A preparing
// transaction stays preparing on disk and is completed on the next start.
func (a *txnActor) shutdown() {
	a.stopTimers()
	a.closed = true
	a.answerWaiters(errResult(kerr.NotCoordinator))
}
