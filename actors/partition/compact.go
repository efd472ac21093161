package partition

import "github.com/regent-broker/regent/storage"

// planCompaction is the pass the log is due for at nowMs, over committed
// and aborted transactions only (below the last stable offset, as Kafka's
// cleaner stops at the first unstable offset). Owner: the actor.
func (a *partitionActor) planCompaction(nowMs int64) (storage.CompactionPlan, bool) {
	return a.p.log.PlanCompaction(nowMs, a.sl.st.LastStable())
}

// compactTxns is what a pass ending at end must know of the partition's
// transactions, from its state at this point of the command sequence: the
// same on every node that applied the same commands. Owner: the actor.
func (a *partitionActor) compactTxns(end int64) *storage.Transactions {
	v := a.sl.st.View()
	aborted := v.AbortedIn(a.sl.st.StartOffset(), min(end, v.LastStable))
	t := &storage.Transactions{LastStable: v.LastStable, Aborted: make([]storage.AbortedRange, len(aborted)),
		// Called during the pass, on the actor: producers expired by an
		// earlier partition.expire_producers are not held.
		HasProducer: func(pid int64) bool { return a.sl.st.producers.get(pid) != nil }}
	for i, x := range aborted {
		t.Aborted[i] = storage.AbortedRange{ProducerID: x.ProducerID, FirstOffset: x.FirstOffset, LastOffset: x.LastOffset}
	}
	return t
}

// forgetAborted drops from the state the aborted transactions a pass
// reported, and snapshots at once so the snapshot on disk stops listing
// them (a later pass drops their markers; compact checks the snapshot
// first). Owner: the actor.
func (a *partitionActor) forgetAborted(rs []storage.AbortedRange) {
	if len(rs) == 0 {
		return
	}
	drop := make([]AbortedTxn, len(rs))
	for i, r := range rs {
		drop[i] = AbortedTxn{ProducerID: r.ProducerID, FirstOffset: r.FirstOffset, LastOffset: r.LastOffset}
	}
	if n := a.sl.st.ForgetAborted(drop); n > 0 {
		a.logger.Debug("aborted transactions forgotten", "transactions", n)
		// Published here, not only by whoever answers the command: with
		// the single-node replicator a pass is applied inside Propose and
		// nothing else publishes, so the view listing these transactions
		// stayed out after a later pass dropped their markers, and every
		// read_committed fetch lost the producers' later transactions
		// (TestFetchViewAcrossAbortCleanup). A view taken before this
		// and read after the drop is AbortedInRead's case.
		a.publish()
		a.snapshot()
	}
}
