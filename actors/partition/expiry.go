package partition

import (
	"container/heap"
	"math"

	"github.com/regent-broker/regent/storage/logconfig"
)

// Producer-state expiry (producer.id.expiration.ms). As in Kafka's
// ProducerStateManager, a producer's state is dropped once its last
// batch's timestamp is that old, unless it has a transaction open on the
// partition. Unlike Kafka, which scans every producer on a timer, the
// state keeps producers in buckets of expiryBucketMs by last timestamp, so
// an append moves one entry between two lists in O(1) and an expiry pass
// costs what it removes. The price is granularity: a producer goes in the
// first pass after its whole bucket is past the expiration, so up to
// expiryBucketMs late (Kafka's own check runs every ten minutes).
//
// Passes run only as replicated commands carrying the leader's clock and
// expiration (partition.expire_producers): every node drops the same
// producers at the same point of the log.

// expiryBucketMs is the width of an expiry bucket.
const expiryBucketMs = 1000

// expiryBucket is a list of the producers whose last timestamp falls in
// one bucket.
type expiryBucket struct{ head, tail producerRef }

// expiryIndex holds every producer without an open transaction, plus
// those with one (an expiry pass skips and unlinks them; the marker that
// ends the transaction links them again), by last-timestamp bucket.
// Owned by the partition actor, with the State.
type expiryIndex struct {
	buckets map[int64]*expiryBucket
	// keys is a min-heap of the keys of buckets: every bucket's key is in
	// it, and so may be the keys of buckets emptied since they went in
	// (stale; a key may be there twice). An emptied bucket leaves the map
	// at once: a producer writing all day moves to a new bucket every
	// second, and kept until a pass reached them, the buckets it left
	// were 86,400 a day on every such partition. The top is never stale
	// (dropStaleTop), and the heap is rebuilt from the map once most of it
	// is stale, so it holds at most about twice the buckets.
	keys bucketHeap
}

type bucketHeap []int64

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h bucketHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *bucketHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *bucketHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func bucketOf(ts int64) int64 {
	k := ts / expiryBucketMs
	if ts < 0 && ts%expiryBucketMs != 0 {
		k--
	}
	return k
}

// place puts e in the bucket of its last timestamp (moving it if it was in
// another). sl holds the entries the links name.
func (x *expiryIndex) place(sl *producerSlab, e *producerEntry) {
	k := bucketOf(e.lastTimestamp)
	if e.inBucket {
		if e.bucket == k {
			return
		}
		x.unlink(sl, e)
	}
	if x.buckets == nil {
		x.buckets = map[int64]*expiryBucket{}
	}
	b := x.buckets[k]
	if b == nil {
		b = &expiryBucket{}
		x.buckets[k] = b
		heap.Push(&x.keys, k)
	}
	e.expPrev, e.expNext = b.tail, 0
	if b.tail != 0 {
		sl.at(b.tail).expNext = e.self
	} else {
		b.head = e.self
	}
	b.tail = e.self
	e.bucket, e.inBucket = k, true
}

// unlink takes e out of its bucket.
func (x *expiryIndex) unlink(sl *producerSlab, e *producerEntry) {
	if !e.inBucket {
		return
	}
	b := x.buckets[e.bucket]
	if e.expPrev != 0 {
		sl.at(e.expPrev).expNext = e.expNext
	} else {
		b.head = e.expNext
	}
	if e.expNext != 0 {
		sl.at(e.expNext).expPrev = e.expPrev
	} else {
		b.tail = e.expPrev
	}
	e.expPrev, e.expNext, e.inBucket = 0, 0, false
	if b.head == 0 {
		delete(x.buckets, e.bucket)
		x.dropStaleTop()
		if len(x.keys) > 2*len(x.buckets)+64 {
			x.rebuildKeys()
		}
	}
}

// dropStaleTop pops the heap's stale keys off its top, so that keys[0], if
// any, is the oldest bucket's.
func (x *expiryIndex) dropStaleTop() {
	for len(x.keys) > 0 && x.buckets[x.keys[0]] == nil {
		heap.Pop(&x.keys)
	}
}

// rebuildKeys makes the heap the buckets' keys alone.
func (x *expiryIndex) rebuildKeys() {
	keys := make(bucketHeap, 0, len(x.buckets))
	for k := range x.buckets {
		keys = append(keys, k)
	}
	heap.Init(&keys)
	x.keys = keys
}

// expiryCutoff is the newest last timestamp that is expired at nowMs:
// Kafka's test is nowMs - lastTimestamp >= expiration.
func expiryCutoff(nowMs, expirationMs int64) (int64, bool) {
	if expirationMs <= 0 {
		expirationMs = logconfig.DefaultProducerIDExpirationMs
	}
	if nowMs < math.MinInt64+expirationMs {
		return 0, false
	}
	return nowMs - expirationMs, true
}

// due reports whether a pass at nowMs would pop a bucket: one whose last
// millisecond is at or before the cutoff.
func (x *expiryIndex) due(nowMs, expirationMs int64) bool {
	cut, ok := expiryCutoff(nowMs, expirationMs)
	return ok && len(x.keys) > 0 && x.keys[0] < bucketOf(cut+1)
}

// ExpiryDue reports whether an expiry pass at nowMs with expirationMs (0:
// the default) would drop anything: the leader's maintenance proposes one
// only then.
func (s *State) ExpiryDue(nowMs, expirationMs int64) bool {
	return s.expiry.due(nowMs, expirationMs)
}

// ExpireProducers drops the state of every producer whose bucket lies
// wholly at or before nowMs - expirationMs (0: the default) and that has no
// transaction open here, and returns how many it dropped. A command: every
// node runs it at the same point of the log with the same arguments.
func (s *State) ExpireProducers(nowMs, expirationMs int64) int {
	cut, ok := expiryCutoff(nowMs, expirationMs)
	if !ok {
		return 0
	}
	n := 0
	for len(s.expiry.keys) > 0 && s.expiry.keys[0] < bucketOf(cut+1) {
		k := heap.Pop(&s.expiry.keys).(int64)
		b := s.expiry.buckets[k]
		if b == nil {
			continue // stale: the bucket emptied and went
		}
		delete(s.expiry.buckets, k)
		for r := b.head; r != 0; {
			e := s.producers.slab.at(r)
			r = e.expNext
			e.expPrev, e.expNext, e.inBucket = 0, 0, false
			if e.txnFirstOffset < 0 {
				s.producers.del(e.pid)
				n++
			}
			// An open transaction keeps its producer: the marker that
			// ends it places the entry again (endTxn).
		}
	}
	s.expiry.dropStaleTop()
	if n > 0 {
		s.shrinkProducers()
		s.changes++
	}
	return n
}

// shrinkProducers gives back the memory of dropped producers (see
// producerTable.shrink) and of the expiry index once empty.
func (s *State) shrinkProducers() {
	s.producers.shrink()
	if len(s.expiry.buckets) == 0 {
		s.expiry = expiryIndex{}
	}
}
