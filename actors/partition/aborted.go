package partition

import "sort"

// abortedIndex is a partition's aborted transactions, for read_committed
// fetches: Kafka's transaction index (.txnindex), kept in memory and in the
// producer snapshot, rebuilt from the markers by a replay.
//
// A fetch of [from, to) must learn every aborted transaction whose records
// may lie there: LastOffset >= from and FirstOffset < to. txns is in
// marker order, so LastOffset increases: "LastOffset >= from" starts at a
// binary search, and up to "LastOffset >= to" (a second one) every entry
// qualifies. Past that, an entry qualifies when its transaction began
// before `to` (it spans `to`); FirstOffset has no order there (a long
// transaction ends after shorter ones that began later). Two structures
// bound that part:
//
//   - bound[i] is a lower bound on the FirstOffset of every transaction
//     after txns[i]: the oldest open transaction's first offset when
//     txns[i]'s marker was written, or the marker's offset + 1 if none was
//     open (every later aborted transaction was open then or began after
//     the marker). It never decreases, so past the first i with
//     bound[i] >= to nothing qualifies: a binary search ends the range.
//   - mins[l-1][b] is the least FirstOffset of block b of 16^l entries
//     (l = 1..indexLevels): inside the range, a block whose least first
//     offset is >= to is skipped whole.
//
// A query costs O(log n) plus O(16·log16 n) per answer at most. Only
// whole blocks' minimums are read, and a block's minimum is final once
// its last entry is appended, before any view holding it is published.
//
// The slices only grow at the end; dropping a prefix (the log start
// passed markers) builds new ones. So a ReadView holds clipped slices
// that no later change touches. Owned by the partition actor; views are
// read-only.
type abortedIndex struct {
	txns  []AbortedTxn
	bound []int64
	mins  [indexLevels][]int64
}

const (
	indexLevels    = 5
	indexFanoutLog = 4 // blocks of 16^l entries
)

// add records an aborted transaction whose marker is the last one so far.
func (x *abortedIndex) add(t AbortedTxn, bound int64) {
	x.txns = append(x.txns, t)
	x.bound = append(x.bound, bound)
	x.summarize(len(x.txns) - 1)
}

// summarize folds entry i, the last, into the block minimums.
func (x *abortedIndex) summarize(i int) {
	f := x.txns[i].FirstOffset
	for l := range indexLevels {
		b := i >> (indexFanoutLog * (l + 1))
		if b == len(x.mins[l]) {
			x.mins[l] = append(x.mins[l], f)
		} else {
			x.mins[l][b] = min(x.mins[l][b], f)
		}
	}
}

// rebuilt returns an index of txns and bound, in new arrays.
func rebuilt(txns []AbortedTxn, bound []int64) abortedIndex {
	x := abortedIndex{txns: make([]AbortedTxn, 0, len(txns)), bound: append([]int64(nil), bound...)}
	for _, t := range txns {
		x.txns = append(x.txns, t)
		x.summarize(len(x.txns) - 1)
	}
	return x
}

// pruneBefore drops the transactions whose marker is below start (the log
// start): no fetch can ask for them.
func (x *abortedIndex) pruneBefore(start int64) bool {
	i := sort.Search(len(x.txns), func(i int) bool { return x.txns[i].LastOffset >= start })
	if i == 0 {
		return false
	}
	*x = rebuilt(x.txns[i:], x.bound[i:])
	return true
}

// forget drops the transactions in drop (matched by producer and marker
// offset), building new arrays, and returns how many it dropped. bound
// stays sound: a bound on every later entry bounds any subset of them.
func (x *abortedIndex) forget(drop []AbortedTxn) int {
	if len(drop) == 0 {
		return 0
	}
	gone := make(map[AbortedTxn]bool, len(drop))
	for _, t := range drop {
		gone[t] = true
	}
	txns := make([]AbortedTxn, 0, len(x.txns))
	bound := make([]int64, 0, len(x.bound))
	for i, t := range x.txns {
		if !gone[t] {
			txns = append(txns, t)
			bound = append(bound, x.bound[i])
		}
	}
	n := len(x.txns) - len(txns)
	if n > 0 {
		*x = rebuilt(txns, bound)
	}
	return n
}

// clip returns a copy of x that appends to x can never write into.
func (x abortedIndex) clip() abortedIndex {
	c := abortedIndex{txns: x.txns[:len(x.txns):len(x.txns)], bound: x.bound[:len(x.bound):len(x.bound)]}
	for l := range indexLevels {
		c.mins[l] = x.mins[l][:len(x.mins[l]):len(x.mins[l])]
	}
	return c
}

// in returns the aborted transactions whose records may lie in [from, to),
// in marker order.
func (x abortedIndex) in(from, to int64) []AbortedTxn {
	n := len(x.txns)
	lo := sort.Search(n, func(i int) bool { return x.txns[i].LastOffset >= from })
	hi := sort.Search(n, func(i int) bool { return x.txns[i].LastOffset >= to })
	// Past the first i with bound[i] >= to, every FirstOffset is >= to.
	end := min(sort.Search(n, func(i int) bool { return x.bound[i] >= to })+1, n)
	var out []AbortedTxn
	if lo < hi {
		out = append(out, x.txns[lo:hi]...)
	}
	for p := max(lo, hi); p < end; {
		skipped := false
		for l := indexLevels - 1; l >= 0; l-- {
			shift := indexFanoutLog * (l + 1)
			size := 1 << shift
			// Only whole blocks: a partial one's minimum may still move.
			if p&(size-1) == 0 && p+size <= n && x.mins[l][p>>shift] >= to {
				p += size
				skipped = true
				break
			}
		}
		if skipped {
			continue
		}
		if x.txns[p].FirstOffset < to {
			out = append(out, x.txns[p])
		}
		p++
	}
	return out
}

// restoredBounds computes bound for a list loaded without it (a producer
// snapshot): the least FirstOffset of every later entry, and of what can
// come after the list — transactions open at the snapshot or begun after
// it, whose first offsets are at least after. Never above the bound the
// live machine would have kept, so the stop rule stays sound.
func restoredBounds(txns []AbortedTxn, after int64) []int64 {
	b := make([]int64, len(txns))
	m := after
	for i := len(txns) - 1; i >= 0; i-- {
		b[i] = m
		m = min(m, txns[i].FirstOffset)
	}
	return b
}
