package partition

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
)

// How the partition actor talks to its replicator.
//
// Proposing: the actor proposes a command and the replicator answers done,
// always later and on another goroutine (replication's contract), with the
// command's typed result. done stores the answer in the request message
// and sends the message back to the actor (as its "answered" type); the
// actor finishes the request when it arrives, so replies always run on the
// actor goroutine and the actor never waits: any number of proposals may
// be in flight. With the single-node replicator the command is applied
// inside Propose, on the actor goroutine, and only the answer travels.
//
// Applying: raft hands every node's actor the committed commands with
// ApplyAsync, from its FSM goroutine, in log order; the mailbox keeps that
// order and the actor applies them one by one.

// answer carries one proposal's outcome from done to the actor: done
// writes it and then sends the request back to the actor; the actor reads
// it only when that message arrives (the mailbox orders the two).
type answer[R any] struct {
	res R
	err error
}

// proposalPanic is a panic inside Propose (a replicator's bug).
type proposalPanic struct{ v any }

func (p proposalPanic) Error() string { return fmt.Sprintf("proposal panicked: %v", p.v) }

// pending is a request whose proposal the actor tracks until it finishes.
type pending interface {
	// finish completes the request: with its answer when failed is nil
	// (the answer has arrived), else with failed (the proposal ended
	// without an answer: close, or a panic in Propose). Actor goroutine.
	finish(a *partitionActor, failed error)
}

// errClosedInFlight ends the proposals still in flight when the partition
// closes: their outcome is unknown.
var errClosedInFlight = fmt.Errorf("partition closed before its proposal was answered: %w", replication.ErrOutcomeUnknown)

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

// propose hands cmd to the replicator for request p; when the answer comes
// it is stored in ans and back (p's "answered" message) is sent to the
// actor, which then calls answered(p). Actor goroutine.
func propose[R any](a *partitionActor, p pending, cmd replication.Command, ans *answer[R], back any) {
	if a.inflight == nil {
		a.inflight = map[pending]struct{}{}
	}
	a.inflight[p] = struct{}{}
	defer func() {
		if r := recover(); r != nil {
			// A panic would lose the request; answer it and keep the
			// partition serving. A late done finds it no longer in flight.
			a.logger.Error("proposal panicked", "command", fmt.Sprintf("%T", cmd), "panic", r)
			delete(a.inflight, p)
			p.finish(a, proposalPanic{r})
		}
	}()
	// replication.As rather than replication.Propose: the same typed
	// answer without a second closure per produce.
	a.repl.Propose(a.key, cmd, func(res any, err error) {
		ans.res, ans.err = replication.As[R](res, err)
		a.send(back) // refused once closed: close answered p
	})
}

// answered finishes p with the answer done stored; close (or a panic in
// Propose) may have finished it already.
func (a *partitionActor) answered(p pending) {
	if _, ok := a.inflight[p]; !ok {
		return
	}
	delete(a.inflight, p)
	p.finish(a, nil)
}

// abortInFlight answers every proposal still in flight; close calls it.
func (a *partitionActor) abortInFlight() {
	for p := range a.inflight {
		delete(a.inflight, p)
		p.finish(a, errClosedInFlight)
	}
}

// applyMsg is a committed command ApplyAsync handed over.
type applyMsg struct {
	cmd  replication.Command
	done func(any)
}

// ApplyAsync implements replication.AsyncApplier. The replicator calls it from
// its goroutine; the command is applied on the actor goroutine, in the
// order ApplyAsync was called, and done runs there after the result is
// published. On a closed partition done runs at once, on the caller's
// goroutine, with kerr.NotLeaderForPartition.
func (a *partitionActor) ApplyAsync(cmd replication.Command, done func(result any)) {
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
	res := a.Apply(m.cmd)
	a.publish()
	m.done(res)
}

// Apply implements replication.Applier. It runs on the actor goroutine:
// inside Propose with the single-node replicator, from applyCommitted with
// raft. A panic becomes a failed result: the replicator (the FSM) must get
// an answer and the partition keep serving.
func (a *partitionActor) Apply(cmd replication.Command) (res any) {
	defer a.noteProducers() // after the recover below, panic or not
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
			case *compactCmd:
				res = compactResult{err: fmt.Errorf("%w: apply compaction: %s", kerr.UnknownServerError, msg)}
			default:
				res = fmt.Errorf("%w: apply %T: %s", kerr.UnknownServerError, cmd, msg)
			}
		}
	}()
	return a.apply(cmd)
}

// apply applies one command. It must be deterministic: every node applies
// the same commands to the same state.
func (a *partitionActor) apply(cmd replication.Command) any {
	switch c := cmd.(type) {
	case *appendCmd:
		a.sl.atTerm(c.term)
		return a.sl.produceAs(c.records, time.Unix(0, c.now).UnixMilli(), c.checked)
	case *markerCmd:
		a.sl.atTerm(c.term)
		return a.sl.writeMarker(c.pid, c.epoch, c.commit, c.coordinatorEpoch, time.Unix(0, c.now).UnixMilli())
	case *deleteRecordsCmd:
		return a.sl.deleteRecords(c.offset)
	case *compactCmd:
		return a.compact(c)
	case *expireCmd:
		return a.expire(c)
	case *evictCmd:
		return a.evict(c)
	default:
		panic(fmt.Sprintf("partition %s: unknown command %T", a.key, cmd))
	}
}

// compact applies a compaction pass to the log, given the State's last
// stable offset, aborted transactions and producers (compactTxns). The
// State changes only by forgetting the aborted transactions the pass
// reports (forgetAborted); cleaning keeps offsets, the log start, each
// held producer's last batches, and the marker of any transaction with a
// batch left.
//
// It blocks the actor (produces, fetch answers' wake-ups, commands behind
// it) for the whole pass: measured 0.2-0.8 s per 100 MB cleaned
// (storage.TestCompactionPassDuration). Acceptable for now; a pass in the
// background that the apply only swaps in would be the way out.
//
// An error leaves this node holding more records than the others below
// the pass's end (never fewer: a segment is swapped whole or not at all)
// and listing aborted transactions the others forgot (safe: their markers
// stay here too, and a later pass reports them again); it is logged, and
// the leader's next pass does not restore the records.
func (a *partitionActor) compact(c *compactCmd) compactResult {
	// The snapshot on disk must be past what this pass cleans and must
	// not list transactions whose markers it may drop (snapshotBefore).
	if err := a.sl.snapshotBefore(c.end); err != nil {
		a.logger.Error("compaction skipped: producer-state snapshot failed", "end", c.end, "err", err)
		return compactResult{err: fmt.Errorf("%w: compaction [%d, %d): producer-state snapshot: %v", kerr.KafkaStorageError, c.dirtyStart, c.end, err)}
	}
	res, err := a.p.log.CompactRange(c.plan(), a.compactTxns(c.end))
	if err != nil {
		a.logger.Error("compaction failed", "dirty_start", c.dirtyStart, "end", c.end, "err", err)
		return compactResult{err: fmt.Errorf("%w: compaction [%d, %d): %v", kerr.KafkaStorageError, c.dirtyStart, c.end, err)}
	}
	a.forgetAborted(res.ForgetAborted)
	return compactResult{}
}

// compactResult is the outcome of applying a compactCmd.
type compactResult struct{ err error }

// deleteRecordsResult is the outcome of applying a deleteRecordsCmd.
type deleteRecordsResult struct {
	lowWatermark int64
	err          error
}

// LocalFailure implements replication.LocalFailer.
func (r deleteRecordsResult) LocalFailure() error { return replication.FailedLocally(r.err) }

// The outcome functions turn a proposal's answer into the request's. A
// Propose error leaves the outcome unknown (or says this node does not
// lead): either way the client retries at the leader it finds in Metadata,
// which NOT_LEADER_OR_FOLLOWER tells it to do (an idempotent producer's
// retry of a batch that did commit is caught as a duplicate). An error
// result (ApplyAsync on a closed partition) arrives as err too.

func produceOutcome(r ProduceResult, err error) ProduceResult {
	if err != nil {
		return ProduceResult{Err: kafkaError(err), ErrMessage: err.Error(), BaseOffset: -1, LogAppendTime: -1}
	}
	return r
}

func markerOutcome(r MarkerResult, err error) error {
	if err != nil {
		return wrapKafka(err)
	}
	return r.Err
}

func deleteOutcome(r deleteRecordsResult, err error) (int64, error) {
	if err != nil {
		return -1, wrapKafka(err)
	}
	return r.lowWatermark, r.err
}

// kafkaError is the Kafka error for a failed proposal or an error result:
// the error's own Kafka code if it has one, UNKNOWN_SERVER_ERROR for a
// panic or a result of the wrong type, NOT_LEADER_OR_FOLLOWER otherwise.
func kafkaError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	var pp proposalPanic
	if errors.As(err, &pp) || errors.Is(err, replication.ErrUnexpectedResult) {
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
