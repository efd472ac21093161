package partition

import (
	"sort"

	"github.com/regent-broker/regent/storage"
)

// ReadView is what a fetch needs of a partition's state — high watermark,
// last stable offset and aborted transactions — as of one moment. The
// actor publishes a new one, whole, after each change; readers take one
// and use only it.
//
// Why one value: a read_committed fetch returns records up to LastStable
// and the aborted transactions among them. With the two read separately,
// a fetch could take a last stable offset from after an ABORT marker and
// an aborted list from before it, and hand the aborted records to the
// consumer as committed ones (issue 10).
//
// Invariant: every transaction with records below LastStable has ended,
// and each of those that aborted is in the list.
type ReadView struct {
	HighWatermark int64
	LastStable    int64
	// aborted is in marker-offset order and never modified: the state
	// only appends to its own lists past these slices' capacity, or drops
	// a prefix (see abortedIndex). abortedGen tells its versions apart.
	aborted    abortedIndex
	abortedGen uint64
}

// View returns the state's read view as of now. Owner only (the actor).
func (s *State) View() *ReadView {
	return &ReadView{
		HighWatermark: s.next,
		LastStable:    s.LastStable(),
		// Clipped so that no append through the view could touch the
		// state's list.
		aborted:    s.aborted.clip(),
		abortedGen: s.abortedGen,
	}
}

// AbortedIn returns the aborted transactions a fetch of [from, to) must
// report: those whose records may lie in that range. to must not pass
// LastStable, or the answer may lack transactions that end later.
func (v *ReadView) AbortedIn(from, to int64) []AbortedTxn {
	return v.aborted.in(from, to)
}

// sameAs reports whether w shows what v does (the actor then keeps v, so
// parked fetches are not woken for nothing).
func (v *ReadView) sameAs(w *ReadView) bool {
	return v.HighWatermark == w.HighWatermark && v.LastStable == w.LastStable && v.abortedGen == w.abortedGen
}

// AbortedInRead is AbortedIn for a read of the log made after v was
// taken, holding every batch in [from, to): has reports whether the read
// holds a batch at an offset. It leaves out the transactions whose ABORT
// marker lies in [from, to) but not in the read.
//
// Why: the cleaner drops an aborted transaction from the state's list in
// one pass and its marker in a later one (storage/compact_txn.go), and a
// fetch's read may come after both while its view is from before them.
// Handed such an entry, Kafka's consumer skips the producer's
// transactional batches until an ABORT marker that is gone, so the
// producer's later committed transactions would be lost to it. Leaving
// the entry out is exact: its marker was listed, so it was dropped, which
// happens only after a pass removed every record of the transaction; the
// read holds none of them. The other way round cannot happen: a
// transaction leaves the list only after its records are gone, so a read
// after the view never holds aborted records its view does not list.
func (v *ReadView) AbortedInRead(from, to int64, has func(offset int64) bool) []AbortedTxn {
	all := v.aborted.in(from, to)
	out := all[:0]
	for _, t := range all {
		if t.LastOffset < to && !has(t.LastOffset) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// SpansHold returns AbortedInRead's has for a read of the batches spans
// (in offset order).
func SpansHold(spans []storage.BatchSpan) func(offset int64) bool {
	return func(off int64) bool {
		i := sort.Search(len(spans), func(i int) bool { return spans[i].LastOffset >= off })
		return i < len(spans) && spans[i].BaseOffset <= off
	}
}
