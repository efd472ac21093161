package partition

import (
	"testing"
	"time"

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
