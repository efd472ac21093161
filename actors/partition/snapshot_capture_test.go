package partition

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestStateRebuiltFromCaptureMatchesLive: a raft snapshot captures the
// partition's files between two applied batches: the segments up to the
// log end N and the producer-state snapshot as last written, at an offset
// O <= N (maintenance ticks write it; applies do not). A node installing
// the capture rebuilds its state from the snapshot at O and replays the
// log from O to N, and must reach the leader's state at N: the same
// aborted list, last stable offset and producers, and the same answer to
// an idempotent producer's retry.
//
// In cluster mode a compaction pass is applied between ticks, so the
// capture may pair a snapshot from before a pass with a log cleaned past
// it: the replay then misses the records the pass removed (an aborted
// transaction begun after O is not relisted, an idempotent producer's
// older batches are no longer tracked) unless the pass first snapshots
// the state whenever it reaches past the snapshot on disk.
func TestStateRebuiltFromCaptureMatchesLive(t *testing.T) {
	a := compactActor(t, 700, cluster.NewLocal())
	a.sl.snapshotPath = filepath.Join(t.TempDir(), producerSnapshotFile)
	w := &txnWriter{t: t, a: a, now: time.Now().UnixMilli(), seq: map[int64]int32{}}
	produceKeyed(t, 0, 40, a)
	if err := a.sl.snapshot(); err != nil { // a maintenance tick: O
		t.Fatal(err)
	}

	// After O: an aborted transaction, the producer's next committed
	// one, an idempotent producer's batches whose keys later records
	// supersede, and enough keyed records to make a pass due.
	const txnPID, idemPID = 2, 9
	w.data(txnPID, "x", "aborted", "y", "aborted")
	w.marker(txnPID, false)
	w.data(txnPID, "z", "committed")
	w.marker(txnPID, true)
	var idem [][]byte
	var idemBase []int64
	for i := range 3 {
		b, err := recordbatch.Build(recordbatch.Header{FirstTimestamp: w.now, MaxTimestamp: w.now, ProducerID: idemPID, BaseSequence: int32(i)},
			[]recordbatch.Record{{Key: []byte("k0"), Value: []byte("idempotent")}})
		if err != nil {
			t.Fatal(err)
		}
		res := a.sl.produce(slices.Clone(b), w.now)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		idem, idemBase = append(idem, b), append(idemBase, res.BaseOffset)
	}
	produceKeyed(t, 1, 150, a)

	aborted := slices.Clone(a.sl.st.Aborted())
	if len(aborted) != 1 {
		t.Fatalf("aborted list %v, want one transaction", aborted)
	}
	passes := 0
	for pass := range 3 {
		// Applied as raft's FSM hands it over: no maintenance tick (and
		// so no snapshot) around it.
		p, ok := a.planCompaction(time.Now().UnixMilli())
		if !ok {
			break
		}
		if r := a.compact(&compactCmd{dirtyStart: p.DirtyStart, end: p.End, now: time.Now().UnixNano(), deleteRetentionMs: p.DeleteRetentionMs}); r.err != nil {
			t.Fatalf("pass %d: %v", pass, r.err)
		}
		passes++
		// The capture: these very files, as a follower's restore makes
		// its directory hold them.
		got, err := openStateLog(a.p.log, a.sl.st.Config(), 0, a.sl.snapshotPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		live := a.sl.st
		if !slices.Equal(got.st.Aborted(), live.Aborted()) {
			t.Fatalf("pass %d: rebuilt aborted list %v, the leader's %v", pass, got.st.Aborted(), live.Aborted())
		}
		if got.st.LastStable() != live.LastStable() {
			t.Fatalf("pass %d: rebuilt last stable offset %d, the leader's %d", pass, got.st.LastStable(), live.LastStable())
		}
		if g, l := sortedInfos(got.st.ProducerInfos()), sortedInfos(live.ProducerInfos()); !slices.Equal(g, l) {
			t.Fatalf("pass %d: rebuilt producers %+v, the leader's %+v", pass, g, l)
		}
		// A retry of the idempotent producer's second batch is a
		// duplicate to both.
		r1 := got.produce(slices.Clone(idem[1]), w.now)
		r2 := a.sl.produce(slices.Clone(idem[1]), w.now)
		if r1.Err != nil || r1.BaseOffset != idemBase[1] {
			t.Fatalf("pass %d: a retried batch is answered %v at %d after the install, want a duplicate of %d", pass, r1.Err, r1.BaseOffset, idemBase[1])
		}
		if r1.Err != r2.Err || r1.BaseOffset != r2.BaseOffset {
			t.Fatalf("pass %d: a retried batch is answered %v at %d after the install, %v at %d by the leader", pass, r1.Err, r1.BaseOffset, r2.Err, r2.BaseOffset)
		}
	}
	// The passes did what the test is about: the aborted records are
	// gone.
	bs := batchesOf(t, a.p.log)
	if passes == 0 {
		t.Fatal("no compaction pass was due")
	}
	if b, ok := bs[aborted[0].FirstOffset]; ok {
		if h, _ := recordbatch.ParseHeader(b); h.NumRecords > 0 {
			t.Fatal("the aborted records are still in the log: no pass cleaned them")
		}
	}
	t.Logf("%d passes", passes)
}

func sortedInfos(in []ProducerInfo) []ProducerInfo {
	slices.SortFunc(in, func(a, b ProducerInfo) int { return int(a.ProducerID - b.ProducerID) })
	return in
}
