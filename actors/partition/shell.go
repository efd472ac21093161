package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/internal/logevery"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// Log is what the shell needs of the partition's log. *storage.Log
// implements it.
type Log interface {
	// AppendAt appends at the log end; nowMs is the command's clock, which
	// the log's roll check uses so that every node rolls alike. On error
	// the batch is not in the log (a partial write is dropped).
	AppendAt(batch []byte, nowMs int64) (baseOffset, lastOffset int64, err error)
	// AppendPatchedAt is AppendAt writing head (a patched copy of the
	// batch's header) in place of the batch's own; batch is not written to.
	AppendPatchedAt(head, batch []byte, nowMs int64) (baseOffset, lastOffset int64, err error)
	// DeleteRecordsBefore moves the log start to offset (never back).
	DeleteRecordsBefore(offset int64) error
	Read(offset int64, maxBytes int, strictMax bool) ([]byte, error)
	StartOffset() int64
	NextOffset() int64
}

// stateLog is the shell around State: it carries out the effects State
// decides on the log (appends, moving the log start), tells State what the
// log did, and rebuilds State from the log at open. Owned by the partition
// actor, like the State and the Log's write side.
type stateLog struct {
	st  *State
	log Log
	// snapshotPath is where producer state is snapshotted ("" = never).
	snapshotPath string
	// snapshotAt is the state's change count the last snapshot holds,
	// snapshotOffset the log end it was taken at.
	snapshotAt     uint64
	snapshotOffset int64
	snapshotted    bool
	// diverged is set when the log and the state disagree on an offset (a
	// broken invariant, never expected): every later write is refused with
	// it, so no record goes at an offset the state did not decide. A
	// restart rebuilds the state from the log.
	diverged error
	logger   *slog.Logger
	// assignedEpoch is the newest epoch in the log's epoch cache (-1:
	// none, or a log that keeps none): write assigns the state's epoch at
	// the first offset written in it.
	assignedEpoch int32
}

// epochLog is a Log that keeps Kafka's leader epoch cache (*storage.Log;
// tests' logs may not).
type epochLog interface {
	LatestEpoch() int32
	AssignEpoch(epoch int32, startOffset int64) error
}

// openStateLog rebuilds the state of an opened log: producer state from
// the snapshot at snapshotPath ("" = none) when it matches the log, then
// from the batches after it.
func openStateLog(lg Log, cfg logconfig.Config, epoch int32, snapshotPath string, logger *slog.Logger) (*stateLog, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st := NewState(cfg, epoch, lg.StartOffset(), lg.NextOffset())
	from := st.StartOffset()
	raw, err := readSnapshot(snapshotPath)
	if err != nil {
		return nil, err
	}
	if raw != nil {
		if off, ok := st.restoreSnapshot(raw); ok {
			from = off
		}
	}
	if err := replayLog(st, lg, from); err != nil {
		return nil, err
	}
	sl := &stateLog{st: st, log: lg, snapshotPath: snapshotPath, logger: logger, assignedEpoch: -1}
	if el, ok := lg.(epochLog); ok {
		sl.assignedEpoch = el.LatestEpoch()
	}
	return sl, nil
}

// replayLog feeds st the batches of lg from offset off to its end.
func replayLog(st *State, lg Log, off int64) error {
	end := lg.NextOffset()
	for off < end {
		chunk, err := lg.Read(off, 1<<20, false)
		if err != nil {
			if errors.Is(err, storage.ErrOffsetOutOfRange) {
				return nil
			}
			return fmt.Errorf("rebuild producer state at offset %d: %w", off, err)
		}
		if len(chunk) == 0 {
			return nil
		}
		next := off
		for len(chunk) >= recordbatch.HeaderSize {
			h, err := recordbatch.ParseHeader(chunk)
			if err != nil || h.TotalSize() > len(chunk) {
				break
			}
			if err := st.Replay(chunk[:h.TotalSize()]); err != nil {
				return fmt.Errorf("rebuild producer state: %w", err)
			}
			next = h.LastOffset() + 1
			chunk = chunk[h.TotalSize():]
		}
		if next <= off {
			return fmt.Errorf("rebuild producer state: no progress at offset %d", off)
		}
		off = next
	}
	return nil
}

// write appends a's batches and returns how many the log took. It checks
// the invariant that the log puts each batch where the state decided. An
// error of the log's own (it refused the write: a full disk, an I/O error)
// is this node's alone (replication.MarkLocal); a broken invariant
// (diverge) is not marked: it is a bug, on every node alike, and the
// partition refusing writes until a restart is the answer to it.
func (sl *stateLog) write(a *Append) (int, error) {
	if sl.diverged != nil {
		return 0, sl.diverged
	}
	if end := sl.log.NextOffset(); end != a.Base {
		sl.diverge(fmt.Errorf("log end %d, state's next offset %d", end, a.Base))
		return 0, sl.diverged
	}
	if err := sl.assignEpoch(a.Base); err != nil {
		return 0, replication.MarkLocal(err)
	}
	for i, b := range a.Batches {
		want := a.headers[i].BaseOffset
		var base int64
		var err error
		if a.Heads != nil {
			base, _, err = sl.log.AppendPatchedAt(a.Heads[i], b, a.NowMs)
		} else {
			base, _, err = sl.log.AppendAt(b, a.NowMs)
		}
		if err != nil {
			return i, replication.MarkLocal(err)
		}
		if base != want {
			// The log took the batch, at an offset the state did not
			// decide: not counted, and the partition refuses writes.
			sl.diverge(fmt.Errorf("log appended at %d, state decided %d", base, want))
			return i, sl.diverged
		}
	}
	return len(a.Batches), nil
}

// assignEpoch records in the log's epoch cache that the state's epoch
// starts at base, the first offset written in it (Kafka assigns it when a
// leader takes over; here the first write of a new term does, on every
// node alike, so the caches are equal).
func (sl *stateLog) assignEpoch(base int64) error {
	e := sl.st.epoch
	if e <= sl.assignedEpoch {
		return nil
	}
	el, ok := sl.log.(epochLog)
	if !ok {
		return nil
	}
	if err := el.AssignEpoch(e, base); err != nil {
		return fmt.Errorf("leader epoch %d at offset %d: %w", e, base, err)
	}
	sl.assignedEpoch = e
	return nil
}

// atTerm raises the state's leader epoch to a committed command's raft
// term (0: a single node's command, which keeps the log's epoch).
func (sl *stateLog) atTerm(term uint64) {
	if term == 0 || term > math.MaxInt32 {
		return
	}
	sl.st.RaiseEpoch(int32(term))
}

// appendFailureLog spaces the lines of logWriteFailure node-wide: a full
// disk fails every partition's every append.
var appendFailureLog logevery.Limiter

// logWriteFailure says, at most every 10 s for the whole node, that the
// log refused a write (a full disk, an I/O error): the clients only see
// KAFKA_STORAGE_ERROR, and retry.
func (sl *stateLog) logWriteFailure(what string, err error) {
	if appendFailureLog.Allow(10 * time.Second) {
		sl.logger.Error("append failed on this node's storage; clients get KAFKA_STORAGE_ERROR and retry (further failures of any partition are not logged for 10 s)",
			"write", what, "err", err)
	}
}

func (sl *stateLog) diverge(err error) {
	sl.diverged = fmt.Errorf("partition log and state diverged (writes refused until restart): %w", err)
	sl.logger.Error("partition log and state diverged", "err", err)
}

// produce applies a produce: the state decides, the log appends, the
// state learns what was appended.
func (sl *stateLog) produce(records []byte, nowMs int64) ProduceResult {
	return sl.produceAs(records, nowMs, false)
}

// produceAs is produce; checked: the records passed State.CheckProduce
// when proposed (State.ProduceChecked).
func (sl *stateLog) produceAs(records []byte, nowMs int64, checked bool) ProduceResult {
	var res ProduceResult
	var a Append
	if checked {
		res, a = sl.st.ProduceChecked(records, nowMs)
	} else {
		res, a = sl.st.Produce(records, nowMs)
	}
	if len(a.Batches) == 0 {
		return res
	}
	n, err := sl.write(&a)
	sl.st.Appended(&a, n)
	if err != nil {
		sl.logWriteFailure("produce", err)
		// The batches before the failure are in the log (and counted);
		// the client retries the request as a whole, and its idempotent
		// retry of those is answered as a duplicate.
		res.Err, res.ErrMessage, res.local = kerr.KafkaStorageError, err.Error(), replication.FailedLocally(err)
		if n == 0 {
			res.BaseOffset = -1
		}
	}
	return res
}

// writeMarker applies a transaction marker.
func (sl *stateLog) writeMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) MarkerResult {
	res, a := sl.st.WriteMarker(pid, epoch, commit, coordinatorEpoch, nowMs)
	if len(a.Batches) == 0 {
		return res
	}
	n, err := sl.write(&a)
	sl.st.Appended(&a, n)
	if err != nil {
		sl.logWriteFailure("transaction marker", err)
		return MarkerResult{Err: fmt.Errorf("append marker: %w", err), Offset: -1}
	}
	return res
}

// deleteRecords applies a DeleteRecords or a retention move.
func (sl *stateLog) deleteRecords(off int64) deleteRecordsResult {
	res, moveTo := sl.st.DeleteRecords(off)
	if moveTo < 0 {
		return res
	}
	err := sl.log.DeleteRecordsBefore(moveTo)
	// Even a failed move may have moved the start (persisted before the
	// segments went): the state follows the log.
	sl.st.StartMoved(sl.log.StartOffset())
	if err != nil {
		sl.logger.Error("delete records failed", "offset", moveTo, "err", err)
		return deleteRecordsResult{lowWatermark: -1, err: replication.MarkLocal(fmt.Errorf("%w: delete records before %d: %v", kerr.KafkaStorageError, moveTo, err))}
	}
	return deleteRecordsResult{lowWatermark: sl.st.StartOffset()}
}

// snapshotBefore writes the snapshot, before a compaction pass cleans the
// log below end, unless the one on disk was taken at or past end and
// after the last ForgetAborted. Why both:
//   - The state is rebuilt (restart, or a raft snapshot installed on
//     another node: it links the segments and this file as they are
//     between two applies) from the snapshot's offset by replaying the
//     log after it. Replayed over batches a pass removed, it would miss
//     them: an aborted transaction begun after the snapshot would not be
//     listed, an idempotent producer's older batches not tracked
//     (TestStateRebuiltFromCaptureMatchesLive). With the snapshot at or
//     past every pass's end, the replayed tail is never cleaned.
//   - The pass may drop the ABORT markers of transactions forgotten since
//     the snapshot on disk: a state rebuilt from one still listing them
//     would hand read_committed consumers transactions with no marker.
func (sl *stateLog) snapshotBefore(end int64) error {
	if sl.snapshotPath == "" || (sl.snapshotted && sl.snapshotOffset >= end && sl.snapshotAt >= sl.st.forgottenAt) {
		return nil
	}
	return sl.snapshot()
}

// snapshot writes the producer state as of the log end (a tick, and
// close); a failure costs only a longer replay at the next start.
func (sl *stateLog) snapshot() error {
	if sl.snapshotPath == "" {
		return nil
	}
	if sl.st.changes == sl.snapshotAt && sl.snapshotted {
		return nil // nothing changed since the last one
	}
	if !sl.snapshotted && sl.st.changes == 0 && sl.st.next == 0 {
		// An empty log with no state: nothing for a restart to skip.
		// (Thousands of partitions created at once would otherwise each
		// write and fsync one at the first tick.)
		return nil
	}
	if err := writeSnapshot(sl.snapshotPath, sl.st.encodeSnapshot()); err != nil {
		return err
	}
	sl.snapshotAt, sl.snapshotOffset, sl.snapshotted = sl.st.changes, sl.st.next, true
	return nil
}
