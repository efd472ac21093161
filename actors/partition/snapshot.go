package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/regent-broker/regent/storage/atomicfile"
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

// snapshot returns the producer state as of the log end.
func (s *State) snapshot() snapshotFile {
	f := snapshotFile{Version: 1, Offset: s.next, Aborted: s.aborted.txns, Producer: make(map[int64]snapshotProducer, s.producers.len())}
	s.producers.each(func(e *producerEntry) {
		p := snapshotProducer{Epoch: e.epoch, TxnFirstOffset: e.txnFirstOffset, CoordinatorEpoch: e.coordinatorEpoch, LastTimestamp: e.lastTimestamp}
		for _, b := range e.tracked() {
			p.Batches = append(p.Batches, snapBatch{FirstSeq: b.firstSeq, LastSeq: b.lastSeq, FirstOffset: b.firstOffset, LastOffset: b.lastOffset, Timestamp: b.timestamp})
		}
		f.Producer[e.pid] = p
	})
	return f
}

// restore loads a snapshot's producer state into a state that has none
// yet, and reports whether it did: a snapshot the log no longer matches
// (taken past the log end, or before the log start) is not loaded, and
// the shell replays the whole log instead.
func (s *State) restore(f snapshotFile) bool {
	if f.Version != 1 || f.Offset > s.next || f.Offset < s.start {
		return false
	}
	var open []*producerEntry
	for pid, p := range f.Producer {
		e := s.producers.add(pid)
		e.epoch, e.txnFirstOffset, e.coordinatorEpoch, e.lastTimestamp = p.Epoch, -1, p.CoordinatorEpoch, p.LastTimestamp
		// At most the last maxTrackedBatches (a snapshot never holds more).
		for _, b := range p.Batches[max(0, len(p.Batches)-maxTrackedBatches):] {
			e.remember(batchMeta{firstSeq: b.FirstSeq, lastSeq: b.LastSeq, firstOffset: b.FirstOffset, lastOffset: b.LastOffset, timestamp: b.Timestamp})
		}
		s.expiry.place(&s.producers.slab, e)
		if p.TxnFirstOffset >= 0 {
			e.txnFirstOffset = p.TxnFirstOffset
			open = append(open, e)
		}
	}
	// The open list is by first offset (the order transactions opened in).
	sort.Slice(open, func(i, j int) bool { return open[i].txnFirstOffset < open[j].txnFirstOffset })
	for _, e := range open {
		s.openTxn(e, e.txnFirstOffset)
	}
	if len(f.Aborted) > 0 {
		after := min(f.Offset, s.LastStable())
		s.aborted = abortedIndex{txns: f.Aborted, bound: restoredBounds(f.Aborted, after)}
		s.aborted.pruneBefore(s.start)
		s.abortedGen++
	}
	return true
}

// readSnapshot reads the producer snapshot at path; ok is false when there
// is none or it cannot be parsed (the shell then replays the whole log).
func readSnapshot(path string) (f snapshotFile, ok bool, err error) {
	if path == "" {
		return f, false, nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("read producer snapshot: %w", err)
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return f, false, nil
	}
	return f, true, nil
}

// writeSnapshot writes f at path, atomically.
func writeSnapshot(path string, f snapshotFile) error {
	raw, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, raw)
}
