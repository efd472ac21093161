// Package partition holds one partition's state machine (validation,
// idempotence, transactions, offsets; pure, see State) and the actor that
// serializes access to it and does its IO (see stateLog).
package partition

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// ProduceResult is the per-partition outcome of a produce.
type ProduceResult struct {
	Err            error // a *kerr.Error, or nil
	ErrMessage     string
	BaseOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	// RecordErrors name the records at fault (KIP-467's record_errors),
	// for an INVALID_RECORD about particular records.
	RecordErrors []RecordError
	// RecordsFree says nothing reads the produce's records any more
	// (never proposed, or answered from the done of a replicator that
	// promises replication.FreeAtDone): the caller may reuse their
	// buffer. False when that cannot be promised (answered while the
	// proposal was in flight, or another replicator).
	RecordsFree bool
	// local is the local failure (replication.LocalFailer) that made
	// Err a KAFKA_STORAGE_ERROR: this node's log refused the append.
	local error
}

// LocalFailure implements replication.LocalFailer.
func (r ProduceResult) LocalFailure() error { return r.local }

// RecordError is one record's fault: its index within its batch.
type RecordError struct {
	BatchIndex int32
	Message    string
}

// State is one partition's state machine, and a pure one: it does no IO.
// Commands (Produce, WriteMarker, DeleteRecords) return the result to
// answer and the effect the shell must carry out on the log — an Append of
// batches already patched with their offsets, leader epoch and append
// time, or a new log start — and the shell reports back what the log did
// (Appended, StartMoved). The read view (View) is the last effect: the
// actor takes it after every command and publishes it when it changed,
// waking parked fetches. The partition actor is the shell (see stateLog);
// scripted tests drive State directly (testdata/*.txt).
//
// Storage errors: a command changes nothing when it decides. The state
// advances only when the shell confirms the effect: Appended with the
// number of batches the log took (all of them, or the prefix before a
// storage error; the log drops a partial write), StartMoved with the log
// start the log reports. So a failed write leaves the state as if the
// command had not come, beyond what the log did keep.
//
// Offsets are the machine's: an Append's first batch goes at NextOffset.
// Invariant (checked by the shell): the log's end equals NextOffset.
//
// Owned by the partition actor: no method may be called concurrently.
type State struct {
	cfg       logconfig.Config
	epoch     int32 // leader epoch stamped into appended batches
	producers producerTable
	// openHead..openTail lists the producers with a transaction open
	// here, by first offset (the order they opened in): the head's is the
	// last stable offset.
	openHead, openTail producerRef
	// expiry holds the producers by last timestamp (producer.id.expiration.ms).
	expiry expiryIndex
	// aborted holds the aborted transactions, for read_committed fetches;
	// shared with readers through ReadView. abortedGen counts its changes.
	aborted    abortedIndex
	abortedGen uint64
	// forgottenAt is changes as of the last ForgetAborted that dropped a
	// transaction (0: none since the state was built).
	forgottenAt uint64
	// start and next are the log's start and end offsets as the machine
	// knows them: next is the offset the next appended batch gets.
	start, next int64
	// changes counts changes to what a snapshot holds (the shell skips
	// writing one when nothing changed).
	changes uint64
	// heads and headBytes back Append.Heads, reused by every Produce: an
	// Append is written and confirmed before the next one is decided
	// (Appended), so a produce allocates no header copies.
	heads     [][]byte
	headBytes []byte
}

// NewState returns the state of a log holding [start, next) with no
// producer state; the shell then replays the log's batches into it
// (Replay), or loads a producer snapshot and replays what follows it.
func NewState(cfg logconfig.Config, epoch int32, start, next int64) *State {
	return &State{cfg: cfg, epoch: epoch, start: start, next: next}
}

// RaiseEpoch makes e the leader epoch stamped into later appends, if it
// is newer than the current one (epochs never go back).
func (s *State) RaiseEpoch(e int32) {
	if e > s.epoch {
		s.epoch = e
	}
}

// Epoch is the leader epoch stamped into appends.
func (s *State) Epoch() int32 { return s.epoch }

// SetConfig swaps the topic config (AlterConfigs).
func (s *State) SetConfig(cfg logconfig.Config) { s.cfg = cfg }

// Config returns the config in force.
func (s *State) Config() logconfig.Config { return s.cfg }

// NextOffset is the offset the next appended batch gets: the log end.
func (s *State) NextOffset() int64 { return s.next }

// StartOffset is the log start offset.
func (s *State) StartOffset() int64 { return s.start }

// Append is the effect of a produce or a marker: batches to append to the
// log in order, the first at Base, each patched with its base offset, the
// leader epoch and (LogAppendTime topics) the append time. The shell
// writes them with the command's clock (NowMs, for the log's roll check)
// and reports how many the log took with State.Appended. An Append
// without batches is no effect.
type Append struct {
	Batches [][]byte
	// Heads, if not nil, holds for each batch the patched copy of its
	// header, to be written in place of the batch's own: a produce's
	// batches are never written to, since on a cluster node they are the
	// raft entry, which replication may still be reading. The State reuses
	// them at its next Produce.
	Heads [][]byte
	Base  int64
	NowMs int64
	// What Appended records, per batch: headers with their base offsets.
	headers    []recordbatch.Header
	appendTime int64        // -1 unless LogAppendTime
	marker     *markerWrite // set for a transaction marker (one batch)
}

// markerWrite is what a written marker does to the producer's state.
type markerWrite struct {
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
}

// Produce decides a produce of one partition's records field: validation,
// sequence checks and offsets. Either every batch is to be appended or
// (on a refusal, or a duplicate answered with the original offsets) none
// is, and the Append is empty (no batches). It writes to no batch (the
// patched headers are copies, Append.Heads) and changes no state: that
// waits for Appended. nowMs is the command's clock.
func (s *State) Produce(records []byte, nowMs int64) (ProduceResult, Append) {
	return s.produce(records, nowMs, false)
}

// CheckProduce applies Produce's checks of the records themselves (CRC,
// framing, each record, the topic's rules at nowMs) and answers what
// Produce would for records that fail them; a nil Err means they pass.
// A proposer checks before replicating, so a refused produce costs no
// round of replication and the nodes applying it need not check again
// (ProduceChecked).
func (s *State) CheckProduce(records []byte, nowMs int64) ProduceResult {
	res, _, _ := s.checkRecords(records, nowMs, false)
	return res
}

// ProduceChecked is Produce for records that passed CheckProduce: the CRC
// and the per-record checks are not done again. The topic's limits on a
// batch's header still are (its config may have changed since), as are
// the sequence checks. Deterministic like Produce: every node applying a
// checked produce decides the same.
func (s *State) ProduceChecked(records []byte, nowMs int64) (ProduceResult, Append) {
	return s.produce(records, nowMs, true)
}

// checkRecords splits records into batches and applies the checks of
// each batch (all of them, or when checked only those of its header
// against the topic's limits). On a refusal res.Err is set and batches is
// nil.
func (s *State) checkRecords(records []byte, nowMs int64, checked bool) (res ProduceResult, batches [][]byte, headers []recordbatch.Header) {
	res = ProduceResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: s.start}
	var err error
	if checked {
		batches, err = recordbatch.SplitChecked(records)
	} else {
		batches, err = recordbatch.Split(records)
	}
	if err != nil {
		// A CRC or framing fault may be damage in transit (clients retry
		// CORRUPT_MESSAGE); contradictions under a good CRC are not.
		res.Err, res.ErrMessage = kerr.CorruptMessage, err.Error()
		if errors.Is(err, recordbatch.ErrInvalidRecord) {
			res.Err = kerr.InvalidRecord
		}
		return res, nil, nil
	}
	if len(batches) == 0 {
		res.Err, res.ErrMessage = kerr.InvalidRecord, "no record batch in produce request"
		return res, nil, nil
	}
	headers = make([]recordbatch.Header, len(batches))
	for i, b := range batches {
		h, _ := recordbatch.ParseHeader(b) // Split validated it
		if msg, kerrv := s.validate(b, h); kerrv != nil {
			res.Err, res.ErrMessage = kerrv, msg
			return res, nil, nil
		}
		headers[i] = h
		if checked {
			continue
		}
		if err := recordbatch.ValidateProduce(b, s.produceOptions(nowMs)); err != nil {
			res.Err, res.ErrMessage = kerr.InvalidRecord, fmt.Sprintf("batch %d: %v", i, err)
			if re := (*recordbatch.RecordErrors)(nil); errors.As(err, &re) {
				// KIP-467: the whole batch is refused, each record at
				// fault named.
				if re.Timestamp {
					res.Err = kerr.InvalidTimestamp
				}
				res.RecordErrors = make([]RecordError, len(re.Records))
				for j, r := range re.Records {
					res.RecordErrors[j] = RecordError{BatchIndex: r.Index, Message: r.Err.Error()}
				}
			} else if re := (*recordbatch.RecordError)(nil); errors.As(err, &re) {
				res.RecordErrors = []RecordError{{BatchIndex: re.Index, Message: re.Err.Error()}}
			}
			return res, nil, nil
		}
	}
	return res, batches, headers
}

func (s *State) produce(records []byte, nowMs int64, checked bool) (ProduceResult, Append) {
	res, batches, headers := s.checkRecords(records, nowMs, checked)
	if res.Err != nil {
		return res, Append{}
	}
	// Idempotence: a request carries one producer's batches in sequence.
	var dup *batchMeta
	for i, h := range headers {
		if h.ProducerID < 0 {
			continue
		}
		chk := checkSequence(s.producers.get(h.ProducerID), h.ProducerEpoch, h.BaseSequence, addSeq(h.BaseSequence, h.LastOffsetDelta))
		if chk.err != nil {
			res.Err = chk.err
			res.ErrMessage = fmt.Sprintf("producer %d epoch %d sequence %d rejected", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
			return res, Append{}
		}
		if chk.duplicate != nil {
			if i != 0 || len(headers) != 1 {
				res.Err, res.ErrMessage = kerr.InvalidRecord, "duplicate batch mixed with new batches"
				return res, Append{}
			}
			dup = chk.duplicate
		}
	}
	if dup != nil {
		res.BaseOffset, res.LogAppendTime = dup.firstOffset, dup.timestamp
		return res, Append{}
	}
	appendTime := int64(-1)
	if s.cfg.LogAppendTime {
		appendTime = nowMs
		res.LogAppendTime = appendTime
	}
	off := s.next
	heads := s.heads[:0]
	headBytes := slices.Grow(s.headBytes[:0], len(batches)*recordbatch.HeaderSize)[:len(batches)*recordbatch.HeaderSize]
	s.headBytes = headBytes
	for i, b := range batches {
		head := headBytes[i*recordbatch.HeaderSize : (i+1)*recordbatch.HeaderSize : (i+1)*recordbatch.HeaderSize]
		copy(head, b)
		recordbatch.SetPartitionLeaderEpoch(head, s.epoch)
		if appendTime >= 0 {
			recordbatch.SetLogAppendTimeHead(head, b, appendTime)
		}
		recordbatch.SetBaseOffset(head, off)
		heads = append(heads, head)
		headers[i].BaseOffset = off
		off = headers[i].LastOffset() + 1
	}
	if len(batches) <= maxReusedHeads {
		s.heads = heads
	} else {
		// A request of many small batches is not kept in the partition's
		// memory after it: the next produce allocates afresh.
		s.heads, s.headBytes = nil, nil
	}
	res.BaseOffset = s.next
	return res, Append{Batches: batches, Heads: heads, Base: s.next, NowMs: nowMs, headers: headers, appendTime: appendTime}
}

// maxReusedHeads bounds the header copies a State keeps for its next
// Produce (maxReusedHeads * recordbatch.HeaderSize bytes): clients send one
// batch per partition in a request, and a request of thousands of tiny
// batches must not leave its size in memory for the partition's life.
const maxReusedHeads = 16

// Appended records that the log took the first n batches of a, which
// must be the Append of the last command decided (nothing may come
// between deciding and confirming). n < len(a.Batches) means a storage
// error stopped the rest: they are not in the log, and the state does not
// count them.
func (s *State) Appended(a *Append, n int) {
	if a.Base != s.next {
		panic(fmt.Sprintf("partition state: append at %d confirmed at log end %d", a.Base, s.next))
	}
	if n > 0 {
		s.changes++
	}
	for i := range n {
		h := a.headers[i]
		switch {
		case a.marker != nil:
			m := a.marker
			s.endTxn(m.pid, m.epoch, m.commit, m.coordinatorEpoch, h.BaseOffset, h.MaxTimestamp)
		case h.ProducerID >= 0:
			s.track(h, h.BaseOffset, a.appendTime)
		}
		s.next = h.LastOffset() + 1
	}
}

// validate applies the topic's limits to one batch's header. It returns
// Kafka's error and a message, or a nil error.
func (s *State) validate(b []byte, h recordbatch.Header) (string, error) {
	if max := s.cfg.MaxMessageBytes; max > 0 && len(b) > int(max) {
		return fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", len(b), max), kerr.MessageTooLarge
	}
	if h.IsControl() {
		return "clients may not produce control batches", kerr.InvalidRecord
	}
	if h.IsTransactional() && h.ProducerID < 0 {
		return "a transactional batch needs a producer id", kerr.InvalidRecord
	}
	// Records (counts, offsets, compressed contents, keys on compacted
	// topics, timestamps) are checked by recordbatch.ValidateProduce
	// after this (produceOptions).
	return "", nil
}

// produceOptions are the topic's rules on each arriving record at nowMs:
// message.timestamp.before.max.ms and after.max.ms apply to every
// record's timestamp on a CreateTime topic, as Kafka checks them.
func (s *State) produceOptions(nowMs int64) recordbatch.ProduceOptions {
	o := recordbatch.ProduceOptions{
		MaxDecompressedBytes: recordbatch.DecompressLimit(s.cfg.MaxMessageBytes),
		RequireKeys:          s.cfg.CleanupCompact,
		MinTimestamp:         math.MinInt64,
		MaxTimestamp:         math.MaxInt64,
	}
	if s.cfg.LogAppendTime {
		return o
	}
	// Past 2^62 a bound means "none" (Kafka's default is Long.MAX_VALUE),
	// and nowMs -/+ it cannot overflow below that.
	if before := s.cfg.MessageTimestampBeforeMaxMs; before >= 0 && before < 1<<62 {
		o.CheckTimestamps, o.MinTimestamp = true, nowMs-before
	}
	if after := s.cfg.MessageTimestampAfterMaxMs; after >= 0 && after < 1<<62 {
		o.CheckTimestamps, o.MaxTimestamp = true, nowMs+after
	}
	return o
}

func (s *State) track(h recordbatch.Header, base, appendTime int64) {
	e := s.entry(h.ProducerID, h.ProducerEpoch)
	e.remember(batchMeta{
		firstSeq: h.BaseSequence, lastSeq: addSeq(h.BaseSequence, h.LastOffsetDelta),
		firstOffset: base, timestamp: appendTime,
	})
	// The batch's max timestamp as the log holds it (a replay reads the
	// same): the append time when the topic sets it.
	e.lastTimestamp = h.MaxTimestamp
	if appendTime >= 0 {
		e.lastTimestamp = appendTime
	}
	s.expiry.place(&s.producers.slab, e)
	if h.IsTransactional() && e.txnFirstOffset < 0 {
		s.openTxn(e, base)
	}
}

// entry returns the producer's state at epoch, starting a fresh sequence
// history when the epoch changes (an open transaction carries over: its
// marker comes with the new epoch). A new entry is placed in the expiry
// index by its caller, which sets its timestamp.
func (s *State) entry(pid int64, epoch int16) *producerEntry {
	e := s.producers.get(pid)
	if e == nil {
		e = s.producers.add(pid)
		// No marker yet: coordinator epoch -1, as Kafka's (DescribeProducers
		// reports it; any coordinator's first marker passes the check).
		e.epoch, e.txnFirstOffset, e.coordinatorEpoch = epoch, -1, -1
	} else if e.epoch != epoch {
		e.epoch = epoch
		e.nBatches = 0
	}
	return e
}

// Replay re-applies one batch read from the log while the shell rebuilds
// producer state at open (from the log start, or from a producer snapshot's
// offset): duplicate detection and open transactions survive a restart.
// b is the whole batch; only a control batch's records are read. The log
// end is the shell's to know (NewState): Replay does not move it.
func (s *State) Replay(b []byte) error {
	h, err := recordbatch.ParseHeader(b)
	if err != nil {
		return err
	}
	s.changes++
	switch {
	case h.IsControl():
		if err := s.replayMarker(h, b); err != nil {
			return fmt.Errorf("marker at %d: %w", h.BaseOffset, err)
		}
	case h.ProducerID >= 0:
		ts := int64(-1)
		if h.TimestampType() == 1 {
			ts = h.MaxTimestamp
		}
		s.track(h, h.BaseOffset, ts)
	}
	return nil
}

// DeleteRecords decides moving the log start to off: a client's
// DeleteRecords (off resolved and checked against the high watermark by
// the proposer) or retention's retain command (off resolved by the
// leader on its log and clock). moveTo is the effect: the offset the
// shell must delete the log before, then report the log's start with
// StartMoved; -1 when there is nothing to do, and then res is the answer.
// The check against the log end is made here, at this point of the log,
// so every node answers alike.
func (s *State) DeleteRecords(off int64) (res deleteRecordsResult, moveTo int64) {
	if off < 0 || off > s.next {
		return deleteRecordsResult{lowWatermark: -1, err: kerr.OffsetOutOfRange}, -1
	}
	if off <= s.start {
		return deleteRecordsResult{lowWatermark: s.start}, -1
	}
	return deleteRecordsResult{lowWatermark: off}, off
}

// ForgetAborted drops aborted transactions a compaction pass reported
// (storage.CompactResult.ForgetAborted): their records are gone and their
// ABORT markers past the delete horizon, and a later pass drops the
// markers once the list no longer names them. Dropping the entry first
// keeps every reader right: an entry without its marker would make a
// read_committed consumer skip the producer's later transactions, a marker
// without an entry is passed over. Returns how many it dropped; the same
// on every node applying the same pass.
func (s *State) ForgetAborted(drop []AbortedTxn) int {
	n := s.aborted.forget(drop)
	if n > 0 {
		s.abortedGen++
		s.changes++
		s.forgottenAt = s.changes
	}
	return n
}

// StartMoved records the log start the log reports after a move (which
// may have failed part way: the log's word is what counts).
func (s *State) StartMoved(start int64) {
	if start > s.next {
		panic(fmt.Sprintf("partition state: log start %d past the log end %d", start, s.next))
	}
	s.start = start
	s.changes++
	// Aborted transactions whose marker went with the log: Kafka deletes
	// a segment's transaction index with the segment. Producer state
	// stays: since KAFKA-7190 only producer.id.expiration.ms drops it.
	if s.aborted.pruneBefore(start) {
		s.abortedGen++
	}
}
