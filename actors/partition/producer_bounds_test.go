package partition

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// seqBatchAt is one idempotent batch of one record, sequence seq, stamped
// tsMs.
func seqBatchAt(t *testing.T, pid int64, seq int32, tsMs int64) []byte {
	t.Helper()
	h := recordbatch.Header{ProducerID: pid, BaseSequence: seq, FirstTimestamp: tsMs, MaxTimestamp: tsMs}
	b, err := recordbatch.Build(h, []recordbatch.Record{{Value: []byte("v"), KeyNull: true}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExpiryIndexForgetsEmptiedBuckets: a producer that writes for an hour,
// a batch a second, leaves no bucket of the seconds it moved on from. The
// index kept each emptied bucket until an expiry pass reached it, a day
// later: 86,400 buckets a day on every partition with a live producer.
func TestExpiryIndexForgetsEmptiedBuckets(t *testing.T) {
	a := maintainActor(t, 1<<30, &recordingRepl{})
	start := time.Now().Add(-2 * time.Hour).UnixMilli()
	const n = 3600
	for i := range n {
		ts := start + int64(i)*1000
		if res := a.sl.produce(seqBatchAt(t, 7, int32(i), ts), ts); res.Err != nil {
			t.Fatalf("batch %d: %v", i, res.Err)
		}
	}
	x := &a.sl.st.expiry
	if len(x.buckets) > 2 || len(x.keys) > 64 {
		t.Fatalf("one producer, %d buckets and %d heap keys held after %d seconds of batches", len(x.buckets), len(x.keys), n)
	}
	// It still expires when its time comes.
	now := start + n*1000 + 86_400_000 + 2000
	if got := a.sl.st.ExpireProducers(now, 0); got != 1 {
		t.Fatalf("expired %d producers, want 1", got)
	}
	if len(x.buckets) != 0 || len(x.keys) != 0 {
		t.Fatalf("after the pass: %d buckets, %d heap keys", len(x.buckets), len(x.keys))
	}
}

// TestProducerBudgetKeep: under the budget nothing is dropped; over it, a
// partition within its share keeps all, and one over its share gives up
// what takes the node back to 7/8 of the budget, never below 7/8 of its
// share.
func TestProducerBudgetKeep(t *testing.T) {
	b := NewProducerBudget(1000)
	if b.Limit() != 1000 || NewProducerBudget(10).Limit() != minProducerBudget {
		t.Fatalf("limits %d, %d", b.Limit(), NewProducerBudget(10).Limit())
	}
	b.moved(0, 900)
	if k, ok := b.keep(900); ok {
		t.Fatalf("under the budget: keep %d", k)
	}
	b.moved(900, 1100) // one partition, 1100 producers
	if k, ok := b.keep(1100); !ok || k != 875 {
		t.Fatalf("one partition over: keep %d %v, want 875", k, ok)
	}
	b.moved(0, 10) // a second partition, within its share of 500
	if k, ok := b.keep(10); ok {
		t.Fatalf("a partition within its share: keep %d", k)
	}
	if k, ok := b.keep(1100); !ok || k != 865 {
		t.Fatalf("the big one: keep %d %v, want 865", k, ok)
	}
	for range 8 { // a flood over eight more: share 100
		b.moved(0, 300)
	}
	if k, ok := b.keep(300); !ok || k != 87 {
		t.Fatalf("flooded partition: keep %d %v, want 7/8 of its share, 87", k, ok)
	}
	b.moved(1100, 0)
	if b.Held() != 10+8*300 || b.holders.Load() != 9 {
		t.Fatalf("held %d by %d partitions", b.Held(), b.holders.Load())
	}
	var none *ProducerBudget
	none.moved(0, 5)
	if _, ok := none.keep(1 << 30); ok {
		t.Fatal("no budget dropped producers")
	}
}

// TestEvictProducersDropsLeastRecent: the producers whose last batch is
// oldest go first, one with a transaction open stays whatever its age,
// and a dropped producer's next batch is taken as a new producer's, any
// sequence.
func TestEvictProducersDropsLeastRecent(t *testing.T) {
	a := maintainActor(t, 1<<30, &recordingRepl{})
	now := time.Now().UnixMilli()
	if res := a.sl.produce(txnBatch(t, 100, 0, 0, 1), now); res.Err != nil {
		t.Fatal(res.Err)
	}
	for pid := int64(1); pid <= 10; pid++ {
		if res := a.sl.produce(seqBatchAt(t, pid, 0, now), now); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	// 1 and 2 write again, so they are the most recent.
	for pid := int64(1); pid <= 2; pid++ {
		if res := a.sl.produce(seqBatchAt(t, pid, 1, now), now); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	st := a.sl.st
	if got := st.EvictProducers(4); got != 7 {
		t.Fatalf("dropped %d, want 7", got)
	}
	var left []int64
	for _, p := range st.ProducerInfos() {
		left = append(left, p.ProducerID)
	}
	slices.Sort(left)
	if !slices.Equal(left, []int64{1, 2, 10, 100}) {
		t.Fatalf("kept %v, want [1 2 10 100]", left)
	}
	if got := st.EvictProducers(0); got != 3 || st.ProducerCount() != 1 {
		t.Fatalf("keep 0: dropped %d, %d left (the open transaction's)", got, st.ProducerCount())
	}
	// Producer 5 was dropped: its sequence 7 is a new producer's.
	if res := a.sl.produce(seqBatchAt(t, 5, 7, now), now); res.Err != nil {
		t.Fatalf("a dropped producer's next batch: %v", res.Err)
	}
	// Producer 1 too: its retry of sequence 1 is appended again, the
	// cost the budget's doc names.
	if res := a.sl.produce(seqBatchAt(t, 1, 1, now), now); res.Err != nil {
		t.Fatalf("a dropped producer's retry: %v", res.Err)
	}
}

// TestEvictionAppliedAlikeOnEveryNode: a leader over its budget proposes
// one pass; through its encoding the pass drops the same producers on a
// node with no budget at all, and a restart of that node after it does not
// bring them back (snapshot).
func TestEvictionAppliedAlikeOnEveryNode(t *testing.T) {
	repl := &recordingRepl{}
	leader := maintainActor(t, 1<<30, repl)
	leader.budget = NewProducerBudget(1000)
	follower := maintainActor(t, 1<<30, &recordingRepl{})
	follower.sl.snapshotPath = filepath.Join(t.TempDir(), producerSnapshotFile)
	now := time.Now().UnixMilli()
	for pid := int64(1); pid <= 1200; pid++ {
		for _, a := range []*partitionActor{leader, follower} {
			// Apply, as every node does, so the budget counts them.
			if res := a.Apply(&appendCmd{records: seqBatchAt(t, pid*7919%1201, 0, now), now: time.Now().UnixNano()}).(ProduceResult); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
	}
	if leader.budget.Held() != 1200 {
		t.Fatalf("budget holds %d, want 1200", leader.budget.Held())
	}
	follower.maintain(true) // no budget: never proposes
	leader.maintain(false)  // not leading: never proposes
	leader.maintain(true)
	cmds := repl.commands()
	if len(cmds) != 1 {
		t.Fatalf("%d proposals, want 1", len(cmds))
	}
	enc, ok := cmds[0].(*evictCmd)
	if !ok || enc.keep != 875 {
		t.Fatalf("proposed %#v, want keep 875", cmds[0])
	}
	dec, err := decodeEvict(enc.AppendCommand(nil))
	if err != nil || *dec.(*evictCmd) != *enc {
		t.Fatalf("round trip %#v -> %#v, %v", enc, dec, err)
	}
	kept := func(a *partitionActor) []int64 {
		var ids []int64
		for _, p := range a.sl.st.ProducerInfos() {
			ids = append(ids, p.ProducerID)
		}
		slices.Sort(ids)
		return ids
	}
	for _, a := range []*partitionActor{leader, follower} {
		if r, ok := a.Apply(dec).(evictResult); !ok || r.evicted != 325 {
			t.Fatalf("apply: %#v, want 325 dropped", r)
		}
	}
	if l, f := kept(leader), kept(follower); len(l) != 875 || !slices.Equal(l, f) {
		t.Fatalf("leader kept %d, follower %d, or not the same ones", len(l), len(f))
	}
	if leader.budget.Held() != 875 {
		t.Fatalf("budget holds %d after the pass, want 875", leader.budget.Held())
	}
	reopened, err := openStateLog(follower.p.log, follower.sl.st.Config(), 0, follower.sl.snapshotPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := reopened.st.ProducerCount(); n != 875 {
		t.Fatalf("reopened with %d producers, want 875", n)
	}
	leader.maintain(true)
	if n := len(repl.commands()); n != 1 {
		t.Fatalf("%d proposals once under the budget", n)
	}
	leader.gc.syncLog = (*storage.Log).Sync
	if err := leader.close(false); err != nil {
		t.Fatal(err)
	}
	if leader.budget.Held() != 0 {
		t.Fatalf("budget holds %d after the partition closed", leader.budget.Held())
	}
}

// TestProducerFloodStaysInBudget: a client inventing a producer id for
// every batch, through the single-node path (evictions applied inside
// Propose, before the produce that would overflow), never leaves the
// partition holding much more than the budget, while a producer that keeps
// writing keeps its state (and so its duplicate detection).
func TestProducerFloodStaysInBudget(t *testing.T) {
	local := cluster.NewLocal()
	a := maintainActor(t, 1<<30, local)
	local.Register(a.key, a)
	a.budget = NewProducerBudget(1000)
	now := time.Now().UnixMilli()
	peak, seq := 0, int32(0)
	settle := func() {
		// The pass's done comes on the replicator's callback goroutine.
		testwait.For(t, "the eviction pass's answer", 5*time.Second, func() bool { return !a.evicting.Load() })
	}
	for i := range 20_000 {
		a.proposeEviction() // what produce does first
		settle()
		pid := int64(1_000_000 + i*13)
		if res := a.Apply(&appendCmd{records: seqBatchAt(t, pid, 0, now), now: time.Now().UnixNano()}).(ProduceResult); res.Err != nil {
			t.Fatal(res.Err)
		}
		peak = max(peak, a.sl.st.ProducerCount())
		if i%50 == 0 {
			a.proposeEviction()
			settle()
			if res := a.Apply(&appendCmd{records: seqBatchAt(t, 7, seq, now), now: time.Now().UnixNano()}).(ProduceResult); res.Err != nil {
				t.Fatalf("the steady producer's batch %d: %v", seq, res.Err)
			}
			seq++
		}
	}
	if peak > 1001 {
		t.Fatalf("the partition held %d producers at its peak, budget 1000", peak)
	}
	// Producer 7's state survived: its last batch again is a duplicate.
	res := a.Apply(&appendCmd{records: seqBatchAt(t, 7, seq-1, now), now: time.Now().UnixNano()}).(ProduceResult)
	if res.Err != nil || a.sl.st.producers.get(7) == nil {
		t.Fatalf("the steady producer's retry: %v", res.Err)
	}
	if next := a.sl.st.NextOffset(); next != int64(20_000+seq) {
		t.Fatalf("log end %d: the retry was appended again (want %d)", next, 20_000+seq)
	}
	t.Logf("20000 invented producer ids: peak %d producers held, budget 1000", peak)
}
