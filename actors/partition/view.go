package partition

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
