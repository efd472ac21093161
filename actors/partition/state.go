// Package partition holds one partition's state machine (validation,
// idempotence, appends) and the actor that serializes access to it.
package partition

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// Log is what the state machine needs of the partition's log. *storage.Log
// implements it.
type Log interface {
	// AppendAt appends at the log end; nowMs is the command's clock, which
	// the log's roll check uses so that every node rolls alike.
	AppendAt(batch []byte, nowMs int64) (baseOffset, lastOffset int64, err error)
	Read(offset int64, maxBytes int, strictMax bool) ([]byte, error)
	StartOffset() int64
	NextOffset() int64
}

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
}

// RecordError is one record's fault: its index within its batch.
type RecordError struct {
	BatchIndex int32
	Message    string
}

// State is one partition's state machine. It is owned by the partition
// actor: no method may be called concurrently.
type State struct {
	log       Log
	cfg       logconfig.Config
	epoch     int32 // leader epoch stamped into appended batches
	producers map[int64]*producerEntry
	// aborted lists aborted transactions in marker-offset order, for
	// read_committed fetches; shared with readers through abortedView.
	aborted []AbortedTxn
	// snapshotPath is where producer state is snapshotted ("" = never).
	snapshotPath string
}

// NewState wraps an opened log. Producer state is rebuilt from the log.
func NewState(log Log, cfg logconfig.Config, epoch int32) (*State, error) {
	return NewStateWithSnapshot(log, cfg, epoch, "")
}

// SetConfig swaps the topic config (AlterConfigs).
func (s *State) SetConfig(cfg logconfig.Config) { s.cfg = cfg }

// Config returns the config in force.
func (s *State) Config() logconfig.Config { return s.cfg }

// Produce validates and appends the batches of one partition's records
// field. Either every batch is appended or (on a validation error) none is,
// except that a storage error mid-way reports what failed.
func (s *State) Produce(records []byte, now time.Time) ProduceResult {
	res := ProduceResult{BaseOffset: -1, LogAppendTime: -1}
	batches, err := recordbatch.Split(records)
	if err != nil {
		// A CRC or framing fault may be damage in transit (clients retry
		// CORRUPT_MESSAGE); contradictions under a good CRC are not.
		res.Err, res.ErrMessage = kerr.CorruptMessage, err.Error()
		if errors.Is(err, recordbatch.ErrInvalidRecord) {
			res.Err = kerr.InvalidRecord
		}
		return s.finish(res)
	}
	if len(batches) == 0 {
		res.Err, res.ErrMessage = kerr.InvalidRecord, "no record batch in produce request"
		return s.finish(res)
	}
	headers := make([]recordbatch.Header, len(batches))
	for i, b := range batches {
		h, _ := recordbatch.ParseHeader(b) // Split validated it
		if msg, kerrv := s.validate(b, h, now); kerrv != nil {
			res.Err, res.ErrMessage = kerrv, msg
			return s.finish(res)
		}
		if err := recordbatch.ValidateProduce(b, recordbatch.ProduceOptions{
			MaxDecompressedBytes: recordbatch.DecompressLimit(s.cfg.MaxMessageBytes),
			RequireKeys:          s.cfg.CleanupCompact,
		}); err != nil {
			res.Err, res.ErrMessage = kerr.InvalidRecord, fmt.Sprintf("batch %d: %v", i, err)
			if re := (*recordbatch.RecordError)(nil); errors.As(err, &re) {
				res.RecordErrors = []RecordError{{BatchIndex: re.Index, Message: re.Err.Error()}}
			}
			return s.finish(res)
		}
		headers[i] = h
	}
	// Idempotence: a request carries one producer's batches in sequence.
	var dup *batchMeta
	for i, h := range headers {
		if h.ProducerID < 0 {
			continue
		}
		chk := checkSequence(s.producers[h.ProducerID], h.ProducerEpoch, h.BaseSequence, h.BaseSequence+h.LastOffsetDelta)
		if chk.err != nil {
			res.Err = chk.err
			res.ErrMessage = fmt.Sprintf("producer %d epoch %d sequence %d rejected", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
			return s.finish(res)
		}
		if chk.duplicate != nil {
			if i != 0 || len(headers) != 1 {
				res.Err, res.ErrMessage = kerr.InvalidRecord, "duplicate batch mixed with new batches"
				return s.finish(res)
			}
			dup = chk.duplicate
		}
	}
	if dup != nil {
		res.BaseOffset, res.LogAppendTime = dup.firstOffset, dup.timestamp
		return s.finish(res)
	}
	appendTime := int64(-1)
	if s.cfg.LogAppendTime {
		appendTime = now.UnixMilli()
		res.LogAppendTime = appendTime
	}
	for i, b := range batches {
		recordbatch.SetPartitionLeaderEpoch(b, s.epoch)
		if appendTime >= 0 {
			recordbatch.SetLogAppendTime(b, appendTime)
		}
		base, last, err := s.log.AppendAt(b, now.UnixMilli())
		if err != nil {
			res.Err, res.ErrMessage = kerr.KafkaStorageError, err.Error()
			return s.finish(res)
		}
		if i == 0 {
			res.BaseOffset = base
		}
		h := headers[i]
		if h.ProducerID >= 0 {
			s.track(h, base, last, appendTime)
		}
	}
	return s.finish(res)
}

func (s *State) finish(res ProduceResult) ProduceResult {
	res.LogStartOffset = s.log.StartOffset()
	return res
}

// validate applies the topic's limits to one batch. It returns Kafka's error
// and a message, or a nil error.
func (s *State) validate(b []byte, h recordbatch.Header, now time.Time) (string, error) {
	if max := s.cfg.MaxMessageBytes; max > 0 && len(b) > int(max) {
		return fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", len(b), max), kerr.MessageTooLarge
	}
	if h.IsControl() {
		return "clients may not produce control batches", kerr.InvalidRecord
	}
	if h.IsTransactional() && h.ProducerID < 0 {
		return "a transactional batch needs a producer id", kerr.InvalidRecord
	}
	if !s.cfg.LogAppendTime {
		nowMs := now.UnixMilli()
		if before := s.cfg.MessageTimestampBeforeMaxMs; before >= 0 && before < 1<<62 && h.FirstTimestamp < nowMs-before {
			return fmt.Sprintf("timestamp %d is more than message.timestamp.before.max.ms=%d before now", h.FirstTimestamp, before), kerr.InvalidTimestamp
		}
		if after := s.cfg.MessageTimestampAfterMaxMs; after >= 0 && after < 1<<62 && h.MaxTimestamp > nowMs+after {
			return fmt.Sprintf("timestamp %d is more than message.timestamp.after.max.ms=%d after now", h.MaxTimestamp, after), kerr.InvalidTimestamp
		}
	}
	// Records (counts, offsets, compressed contents, keys on compacted
	// topics) are checked by recordbatch.ValidateProduce after this.
	return "", nil
}

func (s *State) track(h recordbatch.Header, base, last, appendTime int64) {
	e := s.entry(h.ProducerID, h.ProducerEpoch)
	e.remember(batchMeta{
		firstSeq: h.BaseSequence, lastSeq: h.BaseSequence + h.LastOffsetDelta,
		firstOffset: base, lastOffset: last, timestamp: appendTime,
	})
	e.lastTimestamp = h.MaxTimestamp
	if h.IsTransactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = base
	}
}

// entry returns the producer's state at epoch, starting a fresh sequence
// history when the epoch changes (an open transaction carries over: its
// marker comes with the new epoch).
func (s *State) entry(pid int64, epoch int16) *producerEntry {
	e := s.producers[pid]
	if e == nil {
		e = &producerEntry{epoch: epoch, txnFirstOffset: -1}
		s.producers[pid] = e
	} else if e.epoch != epoch {
		e = &producerEntry{epoch: epoch, txnFirstOffset: e.txnFirstOffset, coordinatorEpoch: e.coordinatorEpoch, lastTimestamp: e.lastTimestamp}
		s.producers[pid] = e
	}
	return e
}

// replayFrom replays batch headers from offset on, so that duplicate
// detection and open transactions survive a restart.
func (s *State) replayFrom(off int64) error {
	end := s.log.NextOffset()
	for off < end {
		chunk, err := s.log.Read(off, 1<<20, false)
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
			switch {
			case h.IsControl():
				b := chunk[:h.TotalSize()]
				if err := s.replayMarker(h, b); err != nil {
					return fmt.Errorf("rebuild producer state: marker at %d: %w", h.BaseOffset, err)
				}
			case h.ProducerID >= 0:
				ts := int64(-1)
				if h.TimestampType() == 1 {
					ts = h.MaxTimestamp
				}
				s.track(h, h.BaseOffset, h.LastOffset(), ts)
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
