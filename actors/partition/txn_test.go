package partition

import (
	"testing"
	"time"

	"github.com/regent-broker/regent/storage/recordbatch"
)

func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	b := batch(t, pid, epoch, seq, n, false)
	h, _ := recordbatch.ParseHeader(b)
	h.Attributes |= recordbatch.AttrTransactional
	recs, err := recordbatch.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := recordbatch.Build(h, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTransactionScript: open transactions hold the last stable offset,
// markers release it, aborts are listed, and all of it is rebuilt from
// the log.
func TestTransactionScript(t *testing.T) {
	lg := &memLog{}
	st, _ := openStateLog(lg, defaultConfig(t), 0, "", nil)
	now := time.Now()
	must := func(res ProduceResult) {
		t.Helper()
		if res.Err != nil {
			t.Fatalf("%v %s", res.Err, res.ErrMessage)
		}
	}
	must(st.produce(batch(t, -1, -1, -1, 2, false), now.UnixMilli())) // 0-1 plain
	must(st.produce(txnBatch(t, 10, 0, 0, 3), now.UnixMilli()))       // 2-4 txn A
	must(st.produce(txnBatch(t, 11, 0, 0, 2), now.UnixMilli()))       // 5-6 txn B
	if lso := st.st.LastStable(); lso != 2 {
		t.Fatalf("LSO with two open transactions: %d, want 2", lso)
	}
	if m := st.writeMarker(10, 0, false, 0, now.UnixMilli()); m.Err != nil || m.Offset != 7 {
		t.Fatalf("abort marker: %+v", m)
	}
	if lso := st.st.LastStable(); lso != 5 {
		t.Fatalf("LSO after aborting A: %d, want 5", lso)
	}
	if m := st.writeMarker(10, 0, false, 0, now.UnixMilli()); m.Offset != -1 || m.Err != nil {
		t.Fatalf("retried marker must write nothing: %+v", m)
	}
	if m := st.writeMarker(11, 0, true, 0, now.UnixMilli()); m.Err != nil || m.Offset != 8 {
		t.Fatalf("commit marker: %+v", m)
	}
	if lso := st.st.LastStable(); lso != 9 {
		t.Fatalf("LSO with nothing open: %d, want 9", lso)
	}
	ab := st.st.Aborted()
	if len(ab) != 1 || ab[0] != (AbortedTxn{ProducerID: 10, FirstOffset: 2, LastOffset: 7}) {
		t.Fatalf("aborted: %+v", ab)
	}
	if got := st.st.View().AbortedIn(8, 9); len(got) != 0 {
		t.Fatalf("aborted in [8,9): %+v", got)
	}
	if got := st.st.View().AbortedIn(0, 3); len(got) != 1 {
		t.Fatalf("aborted in [0,3): %+v", got)
	}
	must(st.produce(txnBatch(t, 11, 0, 2, 1), now.UnixMilli())) // 9: txn B again, left open

	st2, err := openStateLog(lg, defaultConfig(t), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if lso := st2.st.LastStable(); lso != 9 {
		t.Fatalf("rebuilt LSO: %d, want 9", lso)
	}
	if ab := st2.st.Aborted(); len(ab) != 1 || ab[0].FirstOffset != 2 {
		t.Fatalf("rebuilt aborted: %+v", ab)
	}
	if open := st2.st.OpenTxns(); len(open) != 1 || open[0].ProducerID != 11 || open[0].FirstOffset != 9 {
		t.Fatalf("rebuilt open transactions: %+v", open)
	}
	// The next sequence of producer 11 continues after the rebuild.
	must(st2.produce(txnBatch(t, 11, 0, 3, 1), now.UnixMilli()))
}
