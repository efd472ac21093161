package partition

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/cluster"
)

// How the partition actor talks to its replicator.
//
// Proposing: the actor proposes a command and the replicator calls done
// with Apply's result. cluster.Local calls done before Propose returns, on
// the actor goroutine, and the actor finishes the request right there.
// Raft calls done later, from its own goroutine; done then sends the
// request back to the actor as a message and the actor finishes it when
// that message arrives, so replies always run on the actor goroutine and
// the actor never waits: any number of proposals may be in flight.
//
// Applying: raft hands every node's actor the committed commands with
// ApplyAsync, from its FSM goroutine, in log order; the mailbox keeps that
// order and the actor applies them one by one.

// Slot states. Only the proposer (the actor) moves a slot out of
// slotPending to slotLater or slotAbandoned; only done moves it to
// slotInline.
const (
	slotPending   int32 = iota // Propose has not returned and done has not run
	slotInline                 // done ran before Propose returned
	slotLater                  // Propose returned first: done sends a message
	slotAbandoned              // Propose panicked: the request was answered
)

// slot carries one proposal's answer from done to the actor. done writes
// result and err and then moves state; the actor reads them only after it
// saw done's move (inline), or after receiving done's message (later).
type slot struct {
	state  atomic.Int32
	result any
	err    error
	// panicked is Propose's panic; actor goroutine only.
	panicked any
}

// settle stores the replicator's answer. It reports whether the answer
// must travel to the actor as a message (Propose has returned).
func (s *slot) settle(result any, err error) (later bool) {
	s.result, s.err = result, err
	if s.state.CompareAndSwap(slotPending, slotInline) {
		return false
	}
	return s.state.Load() == slotLater
}

// outcome is the answer to finish with; actor goroutine only, once the
// answer is in.
func (s *slot) outcome() (any, error) {
	if s.panicked != nil {
		return nil, proposalPanic{s.panicked}
	}
	return s.result, s.err
}

// proposalPanic is a panic inside Propose (with Local, inside Apply).
type proposalPanic struct{ v any }

func (p proposalPanic) Error() string { return fmt.Sprintf("proposal panicked: %v", p.v) }

// pending is a request whose proposal the actor tracks until it finishes.
type pending interface {
	// finish completes the request with the proposal's outcome, as done
	// got it (or the panic, or the close, that ended it); actor goroutine.
	finish(a *partitionActor, result any, err error)
}

// errClosedInFlight ends the proposals still in flight when the partition
// closes: their outcome is unknown.
var errClosedInFlight = errors.New("partition closed before its proposal was answered")

// gate stops replicator goroutines from sending to the actor once it has
// closed: what they sent before is ahead of the poison pill Close sends,
// so it is still taken; what they would send after is answered where they
// are (ApplyAsync) or was answered by close (a proposal's late done).
type gate struct {
	sync.RWMutex
	closed bool
}

// send delivers msg to the actor unless it has closed, and reports whether
// it did. Any goroutine.
func (a *partitionActor) send(msg any) bool {
	a.gate.RLock()
	defer a.gate.RUnlock()
	if a.gate.closed {
		return false
	}
	a.p.root.Send(a.p.pid, msg)
	return true
}

// propose hands cmd to the replicator. It reports whether the answer is
// already in s (done ran before Propose returned, or Propose panicked);
// otherwise p is tracked and finishes when done's message comes.
func (a *partitionActor) propose(p pending, s *slot, cmd cluster.Command, done func(any, error)) (ready bool) {
	defer func() {
		if r := recover(); r != nil {
			// A panic would lose the request; answer it and keep the
			// partition serving.
			a.logger.Error("proposal panicked", "command", fmt.Sprintf("%T", cmd), "panic", r)
			s.panicked = r
			s.state.CompareAndSwap(slotPending, slotAbandoned)
			ready = true
		}
	}()
	a.repl.Propose(a.key, cmd, done)
	if s.state.CompareAndSwap(slotPending, slotLater) {
		if a.inflight == nil {
			a.inflight = map[pending]struct{}{}
		}
		a.inflight[p] = struct{}{}
		return false
	}
	return true
}

// answered finishes p when its late answer arrives; close may have
// answered it already.
func (a *partitionActor) answered(p pending, s *slot) {
	if _, ok := a.inflight[p]; !ok {
		if !a.closed {
			a.logger.Error("answer to a proposal that is not in flight")
		}
		return
	}
	delete(a.inflight, p)
	r, err := s.outcome()
	p.finish(a, r, err)
}

// abortInFlight answers every proposal still in flight; close calls it.
func (a *partitionActor) abortInFlight() {
	for p := range a.inflight {
		delete(a.inflight, p)
		p.finish(a, nil, errClosedInFlight)
	}
}

// applyMsg is a committed command ApplyAsync handed over.
type applyMsg struct {
	cmd  cluster.Command
	done func(any)
}

// ApplyAsync implements cluster.AsyncApplier. The replicator calls it from
// its goroutine; the command is applied on the actor goroutine, in the
// order ApplyAsync was called, and done runs there after the result is
// published. On a closed partition done runs at once, on the caller's
// goroutine, with kerr.NotLeaderForPartition.
func (a *partitionActor) ApplyAsync(cmd cluster.Command, done func(result any)) {
	if !a.send(&applyMsg{cmd: cmd, done: done}) {
		done(kerr.NotLeaderForPartition)
	}
}

// applyCommitted applies a command ApplyAsync handed over.
func (a *partitionActor) applyCommitted(m *applyMsg) {
	if a.closed {
		m.done(kerr.NotLeaderForPartition)
		return
	}
	res := a.applyRecovered(m.cmd)
	a.publish()
	m.done(res)
}

// applyRecovered is Apply with a panic turned into a failed result: the
// FSM must get an answer and the partition keep serving.
func (a *partitionActor) applyRecovered(cmd cluster.Command) (res any) {
	defer func() {
		if r := recover(); r != nil {
			a.logger.Error("apply panicked", "command", fmt.Sprintf("%T", cmd), "panic", r)
			msg := fmt.Sprint(r)
			switch cmd.(type) {
			case *appendCmd:
				res = ProduceResult{Err: kerr.UnknownServerError, ErrMessage: msg, BaseOffset: -1, LogAppendTime: -1}
			case *markerCmd:
				res = MarkerResult{Err: fmt.Errorf("%w: apply marker: %s", kerr.UnknownServerError, msg), Offset: -1}
			case *deleteRecordsCmd:
				res = deleteRecordsResult{lowWatermark: -1, err: fmt.Errorf("%w: apply delete records: %s", kerr.UnknownServerError, msg)}
			default:
				res = fmt.Errorf("%w: apply %T: %s", kerr.UnknownServerError, cmd, msg)
			}
		}
	}()
	return a.Apply(cmd)
}

// Apply implements cluster.Applier. It runs on the actor goroutine: inside
// Propose with cluster.Local, from applyCommitted with raft. It must be
// deterministic: every node applies the same commands to the same state.
func (a *partitionActor) Apply(cmd cluster.Command) any {
	switch c := cmd.(type) {
	case *appendCmd:
		return a.state.Produce(c.records, time.Unix(0, c.now))
	case *markerCmd:
		return a.state.WriteMarker(c.pid, c.epoch, c.commit, c.coordinatorEpoch, time.Unix(0, c.now))
	case *deleteRecordsCmd:
		return a.applyDeleteRecords(c.offset)
	default:
		panic(fmt.Sprintf("partition %s: unknown command %T", a.key, cmd))
	}
}

// deleteRecordsResult is the outcome of applying a deleteRecordsCmd.
type deleteRecordsResult struct {
	lowWatermark int64
	err          error
}

func (a *partitionActor) applyDeleteRecords(off int64) deleteRecordsResult {
	// The proposer checked off against its high watermark; this node's
	// log end at this point in the log is the same on every node.
	if off < 0 || off > a.p.log.NextOffset() {
		return deleteRecordsResult{lowWatermark: -1, err: kerr.OffsetOutOfRange}
	}
	if off > a.p.log.StartOffset() {
		if err := a.p.log.DeleteRecordsBefore(off); err != nil {
			a.logger.Error("delete records failed", "offset", off, "err", err)
			return deleteRecordsResult{lowWatermark: -1, err: fmt.Errorf("%w: delete records before %d: %v", kerr.KafkaStorageError, off, err)}
		}
	}
	return deleteRecordsResult{lowWatermark: a.p.log.StartOffset()}
}

// The outcome functions turn what done got into the request's answer. A
// Propose error leaves the outcome unknown (or says this node does not
// lead): either way the client retries at the leader it finds in Metadata,
// which NOT_LEADER_OR_FOLLOWER tells it to do. A result may be an error
// rather than the command's result type: ApplyAsync on a closed partition,
// or a replicator that could not apply the command.

func produceOutcome(r any, err error) ProduceResult {
	if err != nil {
		return ProduceResult{Err: kafkaError(err), ErrMessage: err.Error(), BaseOffset: -1, LogAppendTime: -1}
	}
	switch r := r.(type) {
	case ProduceResult:
		return r
	case error:
		return ProduceResult{Err: kafkaError(r), ErrMessage: r.Error(), BaseOffset: -1, LogAppendTime: -1}
	default:
		return ProduceResult{Err: kerr.UnknownServerError, ErrMessage: fmt.Sprintf("unexpected produce result %T", r), BaseOffset: -1, LogAppendTime: -1}
	}
}

func markerOutcome(r any, err error) error {
	if err != nil {
		return wrapKafka(err)
	}
	switch r := r.(type) {
	case MarkerResult:
		return r.Err
	case error:
		return wrapKafka(r)
	default:
		return fmt.Errorf("%w: unexpected marker result %T", kerr.UnknownServerError, r)
	}
}

func deleteOutcome(r any, err error) (int64, error) {
	if err != nil {
		return -1, wrapKafka(err)
	}
	switch r := r.(type) {
	case deleteRecordsResult:
		return r.lowWatermark, r.err
	case error:
		return -1, wrapKafka(r)
	default:
		return -1, fmt.Errorf("%w: unexpected delete records result %T", kerr.UnknownServerError, r)
	}
}

// kafkaError is the Kafka error for a failed proposal or an error result:
// the error's own Kafka code if it has one, UNKNOWN_SERVER_ERROR for a
// panic, NOT_LEADER_OR_FOLLOWER otherwise.
func kafkaError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	var pp proposalPanic
	if errors.As(err, &pp) {
		return kerr.UnknownServerError
	}
	return kerr.NotLeaderForPartition
}

// wrapKafka returns err if it carries a Kafka code, else err wrapped in
// kafkaError's (the callers' callers map errors to codes with errors.As).
func wrapKafka(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return err
	}
	return fmt.Errorf("%w: %w", kafkaError(err), err)
}
