package partition

import "github.com/twmb/franz-go/pkg/kerr"

// maxTrackedBatches is how many recent batches per producer are remembered
// for duplicate detection: Kafka clients keep at most five requests in flight
// per connection when idempotent, so five is what Kafka keeps too.
const maxTrackedBatches = 5

// batchMeta is what duplicate detection needs of an appended batch.
type batchMeta struct {
	firstSeq, lastSeq int32
	firstOffset       int64
	lastOffset        int64
	timestamp         int64 // log append time, or -1
}

// producerEntry is the idempotence state of one producer id on one partition.
// Owned by the partition actor.
type producerEntry struct {
	pid     int64
	batches []batchMeta // oldest first, at most maxTrackedBatches
	// txnFirstOffset is the first offset of the producer's open
	// transaction on this partition, or -1.
	txnFirstOffset int64
	// lastTimestamp is the max timestamp of the producer's last batch (the
	// append time on LogAppendTime topics, the marker's for a marker): what
	// producer.id.expiration.ms is measured from, as in Kafka. It is in the
	// log, so a replay finds the same value.
	lastTimestamp int64

	// Links of the open-transaction list (State.open), set while
	// txnFirstOffset >= 0.
	txnPrev, txnNext *producerEntry
	// Links of the expiry bucket the entry is in (State.expiry), when
	// inBucket.
	expPrev, expNext *producerEntry
	bucket           int64

	// Small fields together: the entry fits a 96-byte allocation.
	coordinatorEpoch int32
	epoch            int16
	inBucket         bool
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

func (e *producerEntry) remember(m batchMeta) {
	if len(e.batches) == maxTrackedBatches {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:maxTrackedBatches-1]
	}
	e.batches = append(e.batches, m)
}

// nextSeq returns the sequence that follows seq, wrapping as Kafka does.
func nextSeq(seq int32) int32 {
	if seq == 1<<31-1 {
		return 0
	}
	return seq + 1
}

// seqCheck is the outcome of checking a batch's sequence against the state.
type seqCheck struct {
	err       error      // nil: append
	duplicate *batchMeta // non-nil: answer success with the original offsets
}

// checkSequence applies Kafka's idempotence rules to one batch.
func checkSequence(e *producerEntry, epoch int16, firstSeq, lastSeq int32) seqCheck {
	if e == nil {
		// A producer this partition holds no state for: a new one, or one
		// whose state expired (producer.id.expiration.ms). Kafka (since
		// KIP-360) accepts any sequence then, so that a producer idle past
		// the expiry is not fenced for good by an OUT_OF_ORDER_SEQUENCE.
		return seqCheck{}
	}
	switch {
	case epoch < e.epoch:
		return seqCheck{err: kerr.InvalidProducerEpoch}
	case epoch > e.epoch:
		// A bumped epoch restarts sequences at zero.
		if firstSeq != 0 {
			return seqCheck{err: kerr.OutOfOrderSequenceNumber}
		}
		return seqCheck{}
	}
	for i := range e.batches {
		b := &e.batches[i]
		if b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return seqCheck{duplicate: b}
		}
	}
	if firstSeq != nextSeq(e.lastSeq()) {
		return seqCheck{err: kerr.OutOfOrderSequenceNumber}
	}
	return seqCheck{}
}

// producerTable holds a partition's producers by id. Producer ids are
// handed out in ascending blocks (ProducerIDs, like Kafka's controller),
// so a new producer's id is usually next to the previous one's: the table
// keeps pages of producerPageSize consecutive ids, found through a map of
// pages. A burst of new producers then touches one page and a map 64
// times smaller than the producers, where a hash map of every producer
// sends each to a random slot of a table that no cache holds: with a
// million producers that was the append's main cost, 2.2x the first
// appends' median latency (TestMillionProducers).
// Owned by the partition actor, with the State.
type producerTable struct {
	pages map[int64]*producerPage
	n     int
	// peakPages is the most pages held since pages was last built
	// (shrink).
	peakPages int
}

const producerPageBits = 6
const producerPageSize = 1 << producerPageBits

type producerPage struct {
	slots [producerPageSize]*producerEntry
	n     int
}

func (t *producerTable) get(pid int64) *producerEntry {
	if p := t.pages[pid>>producerPageBits]; p != nil {
		return p.slots[pid&(producerPageSize-1)]
	}
	return nil
}

// put adds e, whose id is not in the table.
func (t *producerTable) put(e *producerEntry) {
	if t.pages == nil {
		t.pages = map[int64]*producerPage{}
	}
	k := e.pid >> producerPageBits
	p := t.pages[k]
	if p == nil {
		p = &producerPage{}
		t.pages[k] = p
		t.peakPages = max(t.peakPages, len(t.pages))
	}
	p.slots[e.pid&(producerPageSize-1)] = e
	p.n++
	t.n++
}

func (t *producerTable) del(pid int64) {
	k := pid >> producerPageBits
	p := t.pages[k]
	if p == nil || p.slots[pid&(producerPageSize-1)] == nil {
		return
	}
	p.slots[pid&(producerPageSize-1)] = nil
	p.n--
	t.n--
	if p.n == 0 {
		delete(t.pages, k)
	}
}

func (t *producerTable) len() int { return t.n }

// each calls fn for every producer, in no particular order.
func (t *producerTable) each(fn func(*producerEntry)) {
	for _, p := range t.pages {
		for _, e := range p.slots {
			if e != nil {
				fn(e)
			}
		}
	}
}

// shrink rebuilds the page map once most of it was dropped: a Go map
// never gives its buckets back, so the pages of a million expired
// producers would otherwise keep their memory for the life of the
// partition.
func (t *producerTable) shrink() {
	if t.peakPages < 1024 || len(t.pages) > t.peakPages/4 {
		return
	}
	m := make(map[int64]*producerPage, len(t.pages))
	for k, p := range t.pages {
		m[k] = p
	}
	t.pages, t.peakPages = m, len(m)
}
