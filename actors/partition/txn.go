package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// AbortedTxn is one aborted transaction on a partition: a read_committed
// consumer drops the producer's records from FirstOffset up to the marker
// at LastOffset.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// OpenTxn is a transaction with records on this partition and no marker yet.
type OpenTxn struct {
	ProducerID       int64
	ProducerEpoch    int16
	FirstOffset      int64
	LastSequence     int32
	LastTimestamp    int64
	CoordinatorEpoch int32
}

// ProducerInfo describes one producer's state (DescribeProducers).
type ProducerInfo struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64 // -1 if none
}

// Control record types (the key of a control record).
const (
	markerAbort  = 0
	markerCommit = 1
)

// MarkerResult is the outcome of writing a transaction marker.
type MarkerResult struct {
	Err    error
	Offset int64 // the marker's offset, or -1 when nothing was written
}

// LocalFailure implements replication.LocalFailer.
func (r MarkerResult) LocalFailure() error { return replication.FailedLocally(r.Err) }

// WriteMarker decides a COMMIT or ABORT control batch ending the
// producer's open transaction on this partition: the Append to write, at
// NextOffset, whose Appended ends the transaction. With no open
// transaction (and epochs not fenced) it writes nothing and succeeds (a
// retried marker, or a partition added to a transaction that sent it
// nothing): the Append is then empty. nowMs is the
// command's clock (the marker's timestamp).
func (s *State) WriteMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) (MarkerResult, Append) {
	e := s.producers.get(pid)
	// A stale producer epoch or coordinator epoch is fenced whether or not
	// a transaction is open, as Kafka does (WriteTxnMarkers answers them).
	switch {
	case e != nil && epoch < e.epoch:
		return MarkerResult{Err: kerr.InvalidProducerEpoch, Offset: -1}, Append{}
	case e != nil && coordinatorEpoch < e.coordinatorEpoch:
		return MarkerResult{Err: kerr.TransactionCoordinatorFenced, Offset: -1}, Append{}
	case e == nil || e.txnFirstOffset < 0:
		return MarkerResult{Offset: -1}, Append{}
	}
	b, err := buildMarker(pid, epoch, commit, coordinatorEpoch, nowMs)
	if err != nil {
		return MarkerResult{Err: err, Offset: -1}, Append{}
	}
	recordbatch.SetPartitionLeaderEpoch(b, s.epoch)
	recordbatch.SetBaseOffset(b, s.next)
	h, err := recordbatch.ParseHeader(b)
	if err != nil {
		return MarkerResult{Err: fmt.Errorf("marker header: %w", err), Offset: -1}, Append{}
	}
	return MarkerResult{Offset: s.next}, Append{
		Batches: [][]byte{b}, Base: s.next, NowMs: nowMs,
		headers: []recordbatch.Header{h}, appendTime: -1,
		marker: &markerWrite{pid: pid, epoch: epoch, commit: commit, coordinatorEpoch: coordinatorEpoch},
	}
}

func (s *State) endTxn(pid int64, epoch int16, commit bool, coordinatorEpoch int32, markerOffset, ts int64) {
	e := s.entry(pid, epoch)
	if e.txnFirstOffset >= 0 {
		first := e.txnFirstOffset
		s.closeTxn(e)
		if !commit {
			// Every later aborted transaction is open now or begins
			// after this marker (see abortedIndex).
			bound := markerOffset + 1
			if s.openHead != 0 {
				bound = min(bound, s.producers.slab.at(s.openHead).txnFirstOffset)
			}
			s.aborted.add(AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: markerOffset}, bound)
			s.abortedGen++
		}
	}
	e.coordinatorEpoch = coordinatorEpoch
	e.lastTimestamp = ts
	s.expiry.place(&s.producers.slab, e)
}

// openTxn starts e's transaction at first, the log end: transactions open
// in offset order, so the open list stays sorted by first offset and its
// head is the last stable offset.
func (s *State) openTxn(e *producerEntry, first int64) {
	sl := &s.producers.slab
	if s.openTail != 0 && sl.at(s.openTail).txnFirstOffset >= first {
		panic(fmt.Sprintf("partition state: transaction opened at %d after one at %d", first, sl.at(s.openTail).txnFirstOffset))
	}
	e.txnFirstOffset = first
	e.txnPrev, e.txnNext = s.openTail, 0
	if s.openTail != 0 {
		sl.at(s.openTail).txnNext = e.self
	} else {
		s.openHead = e.self
	}
	s.openTail = e.self
}

// closeTxn takes e's transaction off the open list.
func (s *State) closeTxn(e *producerEntry) {
	sl := &s.producers.slab
	if e.txnPrev != 0 {
		sl.at(e.txnPrev).txnNext = e.txnNext
	} else {
		s.openHead = e.txnNext
	}
	if e.txnNext != 0 {
		sl.at(e.txnNext).txnPrev = e.txnPrev
	} else {
		s.openTail = e.txnPrev
	}
	e.txnPrev, e.txnNext = 0, 0
	e.txnFirstOffset = -1
}

// replayMarker re-applies a control batch found while rebuilding state.
func (s *State) replayMarker(h recordbatch.Header, b []byte) error {
	recs, err := recordbatch.Records(b)
	if err != nil {
		return err
	}
	if len(recs) == 0 || len(recs[0].Key) < 4 {
		return errors.New("control batch without a control record")
	}
	typ := int16(binary.BigEndian.Uint16(recs[0].Key[2:]))
	if typ != markerAbort && typ != markerCommit {
		return nil // other control types (e.g. leader change) carry no txn
	}
	var coordEpoch int32
	if len(recs[0].Value) >= 6 {
		coordEpoch = int32(binary.BigEndian.Uint32(recs[0].Value[2:]))
	}
	s.endTxn(h.ProducerID, h.ProducerEpoch, typ == markerCommit, coordEpoch, h.BaseOffset, h.MaxTimestamp)
	return nil
}

func buildMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, nowMs int64) ([]byte, error) {
	typ := int16(markerAbort)
	if commit {
		typ = markerCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	ts := nowMs
	h := recordbatch.Header{
		Attributes:     recordbatch.AttrTransactional | recordbatch.AttrControl,
		FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1,
	}
	return recordbatch.Build(h, []recordbatch.Record{{Key: key, Value: val}})
}

// LastStable is the first offset of the oldest open transaction, or the
// log end when none is open. O(1): the head of the open list.
func (s *State) LastStable() int64 {
	if s.openHead != 0 {
		return s.producers.slab.at(s.openHead).txnFirstOffset
	}
	return s.next
}

// Aborted returns the aborted-transaction list in marker order; callers
// must not modify it.
func (s *State) Aborted() []AbortedTxn { return s.aborted.txns }

// OpenTxns lists the open transactions, by producer id.
func (s *State) OpenTxns() []OpenTxn {
	var out []OpenTxn
	for r := s.openHead; r != 0; {
		e := s.producers.slab.at(r)
		r = e.txnNext
		out = append(out, OpenTxn{ProducerID: e.pid, ProducerEpoch: e.epoch, FirstOffset: e.txnFirstOffset, LastSequence: e.lastSeq(), LastTimestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// ProducerInfos lists every producer's state.
func (s *State) ProducerInfos() []ProducerInfo {
	out := make([]ProducerInfo, 0, s.producers.len())
	s.producers.each(func(e *producerEntry) {
		out = append(out, ProducerInfo{ProducerID: e.pid, ProducerEpoch: e.epoch, LastSequence: e.lastSeq(), LastTimestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnFirstOffset})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
