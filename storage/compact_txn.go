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
//   - An ABORT marker goes in three steps, so that the partition's
//     aborted list (kept apart from the segments, in its state and
//     snapshot) never names a transaction whose marker is gone while its
//     records are not: a read_committed consumer handed such an entry
//     would skip the producer's later transactional batches, waiting for
//     an ABORT marker that never comes. Once none of the transaction's
//     batches is left below it, a pass stamps the marker with a delete
//     horizon (the records went in this pass or before); a pass past the
//     horizon keeps the marker and reports the transaction
//     (CompactResult.ForgetAborted) for the partition to drop from its
//     list; a later pass, finding the transaction no longer in
//     Transactions.Aborted, drops the marker. Between the steps each
//     state is one a reader copes with: entry, marker and no records; then
//     a marker no entry names (a consumer just passes it). Kafka drops
//     the marker and its .txnindex entry together in one segment swap.
//     A fetch whose view of the list predates the forgetting pass and
//     whose read follows the dropping one still meets an entry without
//     its marker: the fetch leaves out listed transactions whose marker
//     falls in its read but is not there (partition's AbortedInRead).
//   - A producer's last data batch is kept (emptied if need be) for its
//     sequence, and its last batch if that is a marker, for its epoch, so
//     producer state rebuilt from the log still fences and deduplicates;
//     not once the producer has expired from the partition's producer
//     state (Transactions.HasProducer), as Kafka's cleaner keeps the last
//     batch only of producers its producer state still holds.

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
	// Aborted holds at least every aborted transaction with records or
	// its marker in [log start, the pass's end), and no transaction the
	// partition has forgotten (an ABORT marker past its horizon whose
	// transaction is not here goes); any order.
	Aborted []AbortedRange
	// HasProducer reports whether the partition's producer state holds
	// pid; nil: every producer counts as held. The last batch of a
	// producer it does not hold (expired) is not kept for its sake.
	HasProducer func(pid int64) bool
}

// CompactResult is what a pass tells the partition about its
// transactions.
type CompactResult struct {
	// ForgetAborted are aborted transactions with no batch left and an
	// ABORT marker past its delete horizon, kept for now: the partition
	// drops them from its aborted list (and makes that durable) before a
	// later pass drops their markers. The same on every node applying the
	// same pass to the same records and transactions.
	ForgetAborted []AbortedRange
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
	// hasProducer is Transactions.HasProducer (nil: all held).
	hasProducer func(pid int64) bool
	// forget collects CompactResult.ForgetAborted, in offset order.
	forget []AbortedRange
}

func newTxnCleaner(t *Transactions) *txnCleaner {
	if t == nil {
		return nil
	}
	tc := &txnCleaner{aborted: map[int64][]AbortedRange{}, live: map[int64]bool{}, hasProducer: t.HasProducer}
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

// indexed returns the aborted transaction of pid whose ABORT marker is
// at off, if the partition still lists it.
func (t *txnCleaner) indexed(pid, off int64) (AbortedRange, bool) {
	rs := t.aborted[pid]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].LastOffset >= off })
	if i < len(rs) && rs[i].LastOffset == off {
		return rs[i], true
	}
	return AbortedRange{}, false
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
// needs: its last data batch, or its last batch if a marker, of a
// producer the partition's state still holds. Batches the scan did not
// see (below the log start) are kept, as keeping is safe.
func (c *cleaner) mayBeLast(h recordbatch.Header) bool {
	if h.ProducerID < 0 {
		return false
	}
	if c.txn != nil && c.txn.hasProducer != nil && !c.txn.hasProducer(h.ProducerID) {
		return false // expired: nothing to rebuild
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

// filterMarker decides a control batch's fate (filter's results). A
// COMMIT or ABORT marker whose transaction left no batch below it is
// stamped with a delete horizon; past it a COMMIT marker goes, and an
// ABORT marker goes once the partition no longer lists its transaction
// (the pass before reports it for forgetting). Anything else is kept
// verbatim, and so is a marker that may be its producer's last batch.
func (c *cleaner) filterMarker(b []byte, h recordbatch.Header) ([]byte, bool, error) {
	live := c.txn.live[h.ProducerID]
	delete(c.txn.live, h.ProducerID)
	typ := controlType(b)
	if live || (typ != controlCommit && typ != controlAbort) {
		return nil, true, nil
	}
	if h.HasDeleteHorizon() {
		if c.nowMs < h.FirstTimestamp {
			c.minHorizon = min(c.minHorizon, h.FirstTimestamp)
			return nil, true, nil
		}
		if typ == controlAbort {
			if r, ok := c.txn.indexed(h.ProducerID, h.BaseOffset); ok {
				// Listed still: forgotten first, the marker goes in a
				// later pass, due at once.
				c.txn.forget = append(c.txn.forget, r)
				c.minHorizon = min(c.minHorizon, h.FirstTimestamp)
				return nil, true, nil
			}
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
