package storage

import (
	"encoding/binary"
	"io"
	"slices"
	"sort"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// Compaction of transactional data, as Kafka's LogCleaner does it:
//
//   - Nothing at or above the last stable offset is cleaned (a pass's end
//     is capped there), so every transaction with records in a pass has
//     ended and the aborted list says which of them aborted.
//   - Records of aborted transactions are removed and never feed the key
//     map; committed transactional records are compacted by key like any
//     other. A batch keeps its producer id, epoch, sequence and flags.
//   - A COMMIT marker goes in two steps once none of its transaction's
//     batches is left below it: the first pass stamps it with a delete
//     horizon (now + delete.retention.ms, as tombstones are, KIP-534), a
//     pass past the horizon drops it. A consumer that read the
//     transaction's records before they went still finds the marker for
//     delete.retention.ms.
//   - ABORT markers are kept, even once their transaction's records are
//     gone: a read_committed consumer that is handed an aborted
//     transaction stops skipping that producer's batches only at its ABORT
//     marker, and the partition's aborted list (from which fetches hand
//     them out) is kept apart from the segments, so it cannot forget a
//     transaction in the same step as a segment swap. Kafka drops both
//     together (its cleaner rewrites the segment's .txnindex); here each
//     costs one small batch per aborted transaction.
//   - A producer's last data batch is kept (emptied if need be) for its
//     sequence, and its last batch if that is a marker, for its epoch, so
//     producer state rebuilt from the log still fences and deduplicates.

// AbortedRange is one aborted transaction: its producer's transactional
// records in [FirstOffset, LastOffset] are aborted, LastOffset being the
// ABORT marker's offset.
type AbortedRange struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// Transactions is what a compaction pass must know of the partition's
// transactions. It comes from the partition's own state at the point the
// pass is applied, which is the same on every node that applies the same
// commands, so the pass stays deterministic.
type Transactions struct {
	// LastStable is the first offset of the oldest open transaction (the
	// log end when none is): nothing at or above it is cleaned.
	LastStable int64
	// Aborted holds at least every aborted transaction with records in
	// [log start, the pass's end); any order, extra entries are harmless.
	Aborted []AbortedRange
}

// txnCleaner is one pass's view of transactions (nil: the log's
// transactions are unknown, and transactional and control batches are
// kept verbatim and feed no key map).
type txnCleaner struct {
	// aborted maps a producer to its aborted transactions, by FirstOffset.
	aborted map[int64][]AbortedRange
	// live notes producers whose current transaction still has a batch
	// kept below the point the pass has reached; its marker then stays.
	live map[int64]bool
}

func newTxnCleaner(t *Transactions) *txnCleaner {
	if t == nil {
		return nil
	}
	tc := &txnCleaner{aborted: map[int64][]AbortedRange{}, live: map[int64]bool{}}
	for _, a := range t.Aborted {
		tc.aborted[a.ProducerID] = append(tc.aborted[a.ProducerID], a)
	}
	for _, rs := range tc.aborted {
		slices.SortFunc(rs, func(a, b AbortedRange) int { return cmpInt64(a.FirstOffset, b.FirstOffset) })
	}
	return tc
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// isAborted reports whether the transactional batch of pid at base
// belongs to an aborted transaction.
func (t *txnCleaner) isAborted(pid, base int64) bool {
	rs := t.aborted[pid]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].LastOffset >= base })
	return i < len(rs) && rs[i].FirstOffset <= base
}

// producerBatch is where one producer's last batches below the pass's end
// are.
type producerBatch struct {
	lastData int64 // base of its last data batch, -1 if none
	lastAny  int64 // base of its last batch, marker or data
}

// scanProducers notes each producer's last batches in [start, end) from
// the batch headers of the segments below end. Batches below the log
// start are left out: a node may still hold some in its first segment and
// another not.
func (c *cleaner) scanProducers(segs []*segment, start int64) error {
	for _, s := range segs {
		sc := newHeaderScanner(s.log, 0, s.size)
		for {
			h, _, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if h.LastOffset() >= c.end {
				return nil
			}
			if h.ProducerID < 0 || h.LastOffset() < start {
				continue
			}
			p, ok := c.producers[h.ProducerID]
			if !ok {
				p = producerBatch{lastData: -1}
			}
			p.lastAny = h.BaseOffset
			if !h.IsControl() {
				p.lastData = h.BaseOffset
			}
			c.producers[h.ProducerID] = p
		}
	}
	return nil
}

// mayBeLast reports whether the batch may be what its producer's state
// needs: its last data batch, or its last batch if a marker. Batches the
// scan did not see (below the log start) are kept, as keeping is safe.
func (c *cleaner) mayBeLast(h recordbatch.Header) bool {
	if h.ProducerID < 0 {
		return false
	}
	p, ok := c.producers[h.ProducerID]
	if !ok {
		return true
	}
	if h.IsControl() {
		return p.lastAny == h.BaseOffset
	}
	return p.lastData == h.BaseOffset
}

// Control record types (the key of a control record: version, type).
const (
	controlAbort  = 0
	controlCommit = 1
)

// controlType returns the type of a control batch's record, -1 if it has
// none or an unreadable one.
func controlType(b []byte) int16 {
	typ := int16(-1)
	_ = recordbatch.Each(b, compactMapIter, func(_ int32, r *recordbatch.Record) error {
		if typ == -1 && len(r.Key) >= 4 {
			typ = int16(binary.BigEndian.Uint16(r.Key[2:]))
		}
		return nil
	})
	return typ
}

// filterMarker decides a control batch's fate (filter's results). Only a
// COMMIT marker whose transaction left no batch below it goes, in two
// passes; everything else is kept verbatim.
func (c *cleaner) filterMarker(b []byte, h recordbatch.Header) ([]byte, bool, error) {
	live := c.txn.live[h.ProducerID]
	delete(c.txn.live, h.ProducerID)
	if live || controlType(b) != controlCommit {
		return nil, true, nil
	}
	if h.HasDeleteHorizon() {
		if c.nowMs < h.FirstTimestamp {
			c.minHorizon = min(c.minHorizon, h.FirstTimestamp)
			return nil, true, nil
		}
		if c.mayBeLast(h) {
			// Kept for its epoch; not a reason for another pass (a later
			// batch of the producer will be, through the dirty ratio).
			return nil, true, nil
		}
		return nil, false, nil
	}
	recs, err := c.keptRecords(b, int(h.NumRecords), func(*recordbatch.Record) bool { return true })
	if err != nil {
		return nil, false, err
	}
	out, err := c.stampHorizon(h, recs)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// stampHorizon rebuilds a batch of recs with the pass's delete horizon in
// FirstTimestamp, record timestamps unchanged (KIP-534).
func (c *cleaner) stampHorizon(h recordbatch.Header, recs []recordbatch.Record) ([]byte, error) {
	for i := range recs {
		recs[i].TimestampDelta = h.FirstTimestamp + recs[i].TimestampDelta - c.horizonMs
	}
	h.FirstTimestamp = c.horizonMs
	h.Attributes |= recordbatch.AttrDeleteHorizon
	c.minHorizon = min(c.minHorizon, c.horizonMs)
	return recordbatch.Build(h, recs)
}
