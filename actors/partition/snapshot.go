package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/regent-broker/regent/storage/atomicfile"
	"github.com/regent-broker/regent/storage/logconfig"
)

// A producer-state snapshot bounds the log scan at start: state is loaded
// from the snapshot and only the batches after its offset are replayed.
// Without one (a first start, or a crash before the first snapshot) the
// whole log is replayed, which is always correct, only slower.

type snapshotFile struct {
	Version  int                        `json:"version"`
	Offset   int64                      `json:"offset"` // log end when taken: a batch boundary
	Aborted  []AbortedTxn               `json:"aborted"`
	Producer map[int64]snapshotProducer `json:"producers"`
}

type snapshotProducer struct {
	Epoch            int16       `json:"epoch"`
	Batches          []snapBatch `json:"batches"`
	TxnFirstOffset   int64       `json:"txn_first_offset"`
	CoordinatorEpoch int32       `json:"coordinator_epoch"`
	LastTimestamp    int64       `json:"last_timestamp"`
}

type snapBatch struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	Timestamp               int64
}

// NewStateWithSnapshot is NewState that loads and keeps producer state in
// a snapshot file at path.
func NewStateWithSnapshot(log Log, cfg logconfig.Config, epoch int32, path string) (*State, error) {
	s := &State{log: log, cfg: cfg, epoch: epoch, producers: map[int64]*producerEntry{}, aborted: []AbortedTxn{}, snapshotPath: path}
	from, err := s.loadSnapshot()
	if err != nil {
		return nil, err
	}
	if err := s.replayFrom(from); err != nil {
		return nil, err
	}
	return s, nil
}

// loadSnapshot returns the offset to replay from: the snapshot's, or the
// log start when there is no usable snapshot.
func (s *State) loadSnapshot() (int64, error) {
	start := s.log.StartOffset()
	if s.snapshotPath == "" {
		return start, nil
	}
	raw, err := os.ReadFile(s.snapshotPath)
	if errors.Is(err, os.ErrNotExist) {
		return start, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read producer snapshot: %w", err)
	}
	var f snapshotFile
	if err := json.Unmarshal(raw, &f); err != nil || f.Version != 1 || f.Offset > s.log.NextOffset() || f.Offset < start {
		// Unreadable, or the log no longer matches it (truncated, or
		// deleted past it): replay everything instead.
		return start, nil
	}
	for pid, p := range f.Producer {
		e := &producerEntry{epoch: p.Epoch, txnFirstOffset: p.TxnFirstOffset, coordinatorEpoch: p.CoordinatorEpoch, lastTimestamp: p.LastTimestamp}
		for _, b := range p.Batches {
			e.batches = append(e.batches, batchMeta{firstSeq: b.FirstSeq, lastSeq: b.LastSeq, firstOffset: b.FirstOffset, lastOffset: b.LastOffset, timestamp: b.Timestamp})
		}
		s.producers[pid] = e
	}
	if f.Aborted != nil {
		s.aborted = f.Aborted
	}
	return f.Offset, nil
}

// Snapshot writes the producer state as of the log end. Called by the
// owner (the partition actor) on a tick and at close.
func (s *State) Snapshot() error {
	if s.snapshotPath == "" {
		return nil
	}
	f := snapshotFile{Version: 1, Offset: s.log.NextOffset(), Aborted: s.aborted, Producer: make(map[int64]snapshotProducer, len(s.producers))}
	for pid, e := range s.producers {
		p := snapshotProducer{Epoch: e.epoch, TxnFirstOffset: e.txnFirstOffset, CoordinatorEpoch: e.coordinatorEpoch, LastTimestamp: e.lastTimestamp}
		for _, b := range e.batches {
			p.Batches = append(p.Batches, snapBatch{FirstSeq: b.firstSeq, LastSeq: b.lastSeq, FirstOffset: b.firstOffset, LastOffset: b.lastOffset, Timestamp: b.timestamp})
		}
		f.Producer[pid] = p
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(s.snapshotPath, raw)
}
