package partition

import (
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxTrackedBatches is how many recent batches per producer are remembered
// for duplicate detection: Kafka clients keep at most five requests in flight
// per connection when idempotent, so five is what Kafka keeps too.
const maxTrackedBatches = 5

// batchMeta is what duplicate detection needs of an appended batch.
type batchMeta struct {
	firstSeq, lastSeq int32
	firstOffset       int64 // what a duplicate is answered with
	timestamp         int64 // log append time, or -1
}

// producerEntry is the idempotence state of one producer id on one partition.
// It holds no pointers (links are slab references, the recent batches are
// inline): a million of them cost the garbage collector nothing to scan
// (see producerSlab). Owned by the partition actor.
type producerEntry struct {
	pid int64
	// txnFirstOffset is the first offset of the producer's open
	// transaction on this partition, or -1.
	txnFirstOffset int64
	// lastTimestamp is the max timestamp of the producer's last batch (the
	// append time on LogAppendTime topics, the marker's for a marker): what
	// producer.id.expiration.ms is measured from, as in Kafka. It is in the
	// log, so a replay finds the same value.
	lastTimestamp int64
	bucket        int64 // the expiry bucket, when inBucket

	self producerRef
	// Links of the open-transaction list (State.openHead), set while
	// txnFirstOffset >= 0.
	txnPrev, txnNext producerRef
	// Links of the expiry bucket the entry is in (State.expiry), when
	// inBucket.
	expPrev, expNext producerRef

	coordinatorEpoch int32
	epoch            int16
	inBucket         bool
	nBatches         uint8
	batches          [maxTrackedBatches]batchMeta // oldest first, nBatches of them
}

// tracked returns the remembered batches, oldest first.
func (e *producerEntry) tracked() []batchMeta { return e.batches[:e.nBatches] }

func (e *producerEntry) lastSeq() int32 {
	if e.nBatches == 0 {
		return -1
	}
	return e.batches[e.nBatches-1].lastSeq
}

func (e *producerEntry) remember(m batchMeta) {
	if e.nBatches == maxTrackedBatches {
		copy(e.batches[:], e.batches[1:])
		e.nBatches--
	}
	e.batches[e.nBatches] = m
	e.nBatches++
}

// nextSeq returns the sequence that follows seq, wrapping as Kafka does.
func nextSeq(seq int32) int32 { return addSeq(seq, 1) }

// addSeq returns seq + n (n >= 0) wrapping past 2^31-1 to 0, as Kafka's
// sequences do (Go's int32 would wrap to a negative number, and the
// producer's next batch would then be out of order).
func addSeq(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
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
	for i := range e.nBatches {
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

// producerRef names an entry in a producerSlab: its index + 1, so that the
// zero value is "none".
type producerRef int32

// producerSlab holds the producer entries in chunks of slabChunk, pointer
// free, so that the garbage collector never scans them. With entries as
// separate objects holding pointers, a million producers made the
// collector mark a 130 MB pointer graph: it was marking ~60% of the time
// near the end of TestMillionProducers and took ~20% of the CPU.
// A chunk is allocated a block of slabBlock entries at a time as it fills:
// a whole chunk is ~180 KB, and most partitions have a few producers
// (24 partitions of 4 idempotent producers held 4.3 MB in their first
// chunks). Pointers from at stay valid until the entry is released
// (blocks never move). Owned by the partition actor, with the State.
type producerSlab struct {
	chunks []slabChunkBlocks // nil once released
	live   []int32           // live entries per chunk
	free   []producerRef     // released slots (some in released chunks: skipped)
	top    int               // slots handed out from the last chunk
	n      int
}

const slabChunkBits = 10
const slabChunk = 1 << slabChunkBits
const slabBlockBits = 4
const slabBlock = 1 << slabBlockBits

// slabChunkBlocks is one chunk: its blocks, allocated as slots are handed
// out (nil: none yet).
type slabChunkBlocks []*[slabBlock]producerEntry

func (s *producerSlab) at(r producerRef) *producerEntry {
	i := int(r) - 1
	return &s.chunks[i>>slabChunkBits][(i&(slabChunk-1))>>slabBlockBits][i&(slabBlock-1)]
}

// alloc returns a zeroed entry and its reference.
func (s *producerSlab) alloc() (producerRef, *producerEntry) {
	var r producerRef
	for r == 0 && len(s.free) > 0 {
		r = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		if s.chunks[(int(r)-1)>>slabChunkBits] == nil {
			r = 0 // its chunk went
		}
	}
	if r == 0 {
		if len(s.chunks) == 0 || s.top == slabChunk {
			s.chunks = append(s.chunks, make(slabChunkBlocks, slabChunk/slabBlock))
			s.live = append(s.live, 0)
			s.top = 0
		}
		if c := s.chunks[len(s.chunks)-1]; c[s.top>>slabBlockBits] == nil {
			c[s.top>>slabBlockBits] = new([slabBlock]producerEntry)
		}
		r = producerRef((len(s.chunks)-1)<<slabChunkBits + s.top + 1)
		s.top++
	}
	c := (int(r) - 1) >> slabChunkBits
	s.live[c]++
	s.n++
	e := s.at(r)
	*e = producerEntry{self: r}
	return r, e
}

// release frees r's slot; a chunk left empty (other than the one being
// filled) is given back, and all of them once the slab is empty.
func (s *producerSlab) release(r producerRef) {
	c := (int(r) - 1) >> slabChunkBits
	*s.at(r) = producerEntry{}
	s.live[c]--
	s.n--
	switch {
	case s.n == 0:
		*s = producerSlab{}
		return
	case s.live[c] == 0 && c != len(s.chunks)-1:
		s.chunks[c] = nil
	default:
		s.free = append(s.free, r)
	}
	// Most of the free list may point into released chunks: compact it
	// once it is over twice what the remaining chunks could hold.
	if kept := len(s.chunks) * slabChunk; len(s.free) > 2*kept {
		f := s.free[:0]
		for _, x := range s.free {
			if s.chunks[(int(x)-1)>>slabChunkBits] != nil {
				f = append(f, x)
			}
		}
		s.free = slices.Clip(f)
	}
}

// producerTable finds a partition's producers by id. Producer ids are
// handed out in ascending blocks (ProducerIDs, like Kafka's controller),
// so a new producer's id is usually next to the previous one's: the table
// keeps pages of producerPageSize consecutive ids, found through a map of
// pages. A burst of new producers then touches one page and a map 16
// times smaller than the producers, where a hash map of every producer
// sends each to a random slot of a table that no cache holds: with a
// million producers that was the append's main cost, 2.2x the first
// appends' median latency (TestMillionProducers). Pages are small (16
// ids, 72 bytes) because ids a client makes up are scattered, a page
// each: 64-id pages took a broker to 508 MiB RSS under 400,000 such ids,
// 16-id pages to 412 MiB; a million consecutive ids cost the same either
// way (TestMillionProducers: 191 against 189 MiB, append CPU last/first
// 1.07 against 1.13).
// Owned by the partition actor, with the State.
type producerTable struct {
	slab  producerSlab
	pages map[int64]*producerPage
	// peakPages is the most pages held since pages was last built
	// (shrink).
	peakPages int
}

const producerPageBits = 4
const producerPageSize = 1 << producerPageBits

type producerPage struct {
	slots [producerPageSize]producerRef
	n     int
}

func (t *producerTable) get(pid int64) *producerEntry {
	if p := t.pages[pid>>producerPageBits]; p != nil {
		if r := p.slots[pid&(producerPageSize-1)]; r != 0 {
			return t.slab.at(r)
		}
	}
	return nil
}

// add returns a new entry for pid, which is not in the table.
func (t *producerTable) add(pid int64) *producerEntry {
	if t.pages == nil {
		t.pages = map[int64]*producerPage{}
	}
	k := pid >> producerPageBits
	p := t.pages[k]
	if p == nil {
		p = &producerPage{}
		t.pages[k] = p
		t.peakPages = max(t.peakPages, len(t.pages))
	}
	r, e := t.slab.alloc()
	e.pid = pid
	p.slots[pid&(producerPageSize-1)] = r
	p.n++
	return e
}

// del removes pid's entry (no longer linked anywhere).
func (t *producerTable) del(pid int64) {
	k := pid >> producerPageBits
	p := t.pages[k]
	if p == nil || p.slots[pid&(producerPageSize-1)] == 0 {
		return
	}
	t.slab.release(p.slots[pid&(producerPageSize-1)])
	p.slots[pid&(producerPageSize-1)] = 0
	p.n--
	if p.n == 0 {
		delete(t.pages, k)
	}
}

func (t *producerTable) len() int { return t.slab.n }

// each calls fn for every producer, in no particular order.
func (t *producerTable) each(fn func(*producerEntry)) {
	for _, p := range t.pages {
		for _, r := range p.slots {
			if r != 0 {
				fn(t.slab.at(r))
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
