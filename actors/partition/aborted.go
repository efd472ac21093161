package partition

import "sort"

// abortedIndex is a partition's aborted transactions, for read_committed
// fetches: Kafka's transaction index (.txnindex), kept in memory and in the
// producer snapshot, rebuilt from the markers by a replay.
//
// A fetch of [from, to) must learn every aborted transaction whose records
// may lie there: LastOffset >= from and FirstOffset < to. txns is in
// marker order, so LastOffset increases and "LastOffset >= from" is a
// suffix found by binary search. FirstOffset has no order (a long
// transaction ends after shorter ones that began later), so bound[i]
// records a lower bound on the FirstOffset of every transaction after
// txns[i]: the oldest open transaction's first offset when txns[i]'s
// marker was written, or the marker's offset + 1 if none was open — every
// later aborted transaction was open then or began after the marker.
// bound never decreases, so "bound[i] >= to" is also a suffix found by
// binary search, and nothing past its first element can qualify. A query
// costs O(log n + k + m): the k answers, and the m transactions between
// that ended while one begun before `to` was still open (bounded by what
// aborts in one transaction.max.timeout.ms; Kafka's index scan has the
// same stop rule).
//
// Both slices only grow at the end or lose a prefix (the log start moved
// past their markers), so a ReadView holds clipped slices of them that
// no later change touches. Owned by the partition actor; views are
// read-only.
type abortedIndex struct {
	txns  []AbortedTxn
	bound []int64
}

// add records an aborted transaction whose marker is the last one so far.
func (x *abortedIndex) add(t AbortedTxn, bound int64) {
	x.txns = append(x.txns, t)
	x.bound = append(x.bound, bound)
}

// pruneBefore drops the transactions whose marker is below start (the log
// start): no fetch can ask for them. It copies once most of the backing
// array is dead, so memory follows the log.
func (x *abortedIndex) pruneBefore(start int64) bool {
	i := sort.Search(len(x.txns), func(i int) bool { return x.txns[i].LastOffset >= start })
	if i == 0 {
		return false
	}
	x.txns, x.bound = x.txns[i:], x.bound[i:]
	if cap(x.txns) > 64 && len(x.txns) < cap(x.txns)/4 {
		x.txns = append([]AbortedTxn(nil), x.txns...)
		x.bound = append([]int64(nil), x.bound...)
	}
	return true
}

// clip returns a copy of x that appends to x can never write into.
func (x abortedIndex) clip() abortedIndex {
	return abortedIndex{txns: x.txns[:len(x.txns):len(x.txns)], bound: x.bound[:len(x.bound):len(x.bound)]}
}

// in returns the aborted transactions whose records may lie in [from, to),
// in marker order.
func (x abortedIndex) in(from, to int64) []AbortedTxn {
	lo := sort.Search(len(x.txns), func(i int) bool { return x.txns[i].LastOffset >= from })
	// Past the first i with bound[i] >= to, every FirstOffset is >= to.
	hi := sort.Search(len(x.bound), func(i int) bool { return x.bound[i] >= to })
	end := min(hi+1, len(x.txns))
	var out []AbortedTxn
	for i := lo; i < end; i++ {
		if x.txns[i].FirstOffset < to {
			out = append(out, x.txns[i])
		}
	}
	return out
}

// restoredBounds computes bound for a list loaded without it (a producer
// snapshot): the least FirstOffset of every later entry, and of what can
// come after the list — transactions open at the snapshot (openFirst, or
// next when none) or begun after it. Never above the bound the live
// machine would have kept, so the stop rule stays sound.
func restoredBounds(txns []AbortedTxn, after int64) []int64 {
	b := make([]int64, len(txns))
	m := after
	for i := len(txns) - 1; i >= 0; i-- {
		b[i] = m
		m = min(m, txns[i].FirstOffset)
	}
	return b
}
