package partition

import (
	"bytes"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestCompactionWithPartitionTransactions: the leader's pass stops at the
// State's last stable offset, and applied on the actor it is given the
// State's aborted transactions: the aborted records go (the ABORT marker
// stays), nothing from the open transaction's first offset on changes,
// and the last stable offset and aborted list a fetch reads are as before.
func TestCompactionWithPartitionTransactions(t *testing.T) {
	local := cluster.NewLocal()
	a := compactActor(t, 700, local)
	local.Register(a.key, a)
	now := time.Now().UnixMilli()
	txn := func(pid int64, seq int32, kv ...string) {
		t.Helper()
		var recs []recordbatch.Record
		for i := 0; i < len(kv); i += 2 {
			recs = append(recs, recordbatch.Record{OffsetDelta: int32(i / 2), Key: []byte(kv[i]), Value: []byte(kv[i+1])})
		}
		b, err := recordbatch.Build(recordbatch.Header{Attributes: recordbatch.AttrTransactional, FirstTimestamp: now, MaxTimestamp: now,
			ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq}, recs)
		if err != nil {
			t.Fatal(err)
		}
		if res := a.sl.produce(b, now); res.Err != nil {
			t.Fatalf("transactional produce: %v", res.Err)
		}
	}
	marker := func(pid int64, commit bool) int64 {
		t.Helper()
		res := a.sl.writeMarker(pid, 0, commit, 0, now)
		if res.Err != nil || res.Offset < 0 {
			t.Fatalf("marker: %+v", res)
		}
		return res.Offset
	}
	txn(1, 0, "k0", "committed", "c1", "committed")
	marker(1, true)
	txn(2, 0, "k1", "aborted", "k0", "aborted")
	abort := marker(2, false)
	produceKeyed(t, 0, 150, a)
	open := a.sl.st.NextOffset()
	txn(3, 0, "k5", "open")
	produceKeyed(t, 1, 60, a)
	if lso := a.sl.st.LastStable(); lso != open {
		t.Fatalf("last stable %d, want the open transaction's first offset %d", lso, open)
	}
	before := batchesOf(t, a.p.log)
	viewBefore := a.sl.st.View()

	a.maintain(true)
	after := batchesOf(t, a.p.log)
	if len(after) >= len(before) {
		t.Fatalf("nothing cleaned: %d batches, had %d", len(after), len(before))
	}
	for off, b := range after {
		h, _ := recordbatch.ParseHeader(b)
		if off >= open && !bytes.Equal(b, before[off]) {
			t.Fatalf("batch at %d, above the last stable offset %d, changed", off, open)
		}
		if h.IsControl() {
			continue
		}
		recs, err := recordbatch.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if string(r.Value) == "aborted" {
				t.Fatalf("aborted record %s at %d kept", r.Key, off+int64(r.OffsetDelta))
			}
		}
	}
	for off := range before {
		if _, ok := after[off]; off >= open && !ok {
			t.Fatalf("batch at %d, above the last stable offset %d, removed", off, open)
		}
	}
	if _, ok := after[abort]; !ok {
		t.Fatalf("ABORT marker at %d removed", abort)
	}
	v := a.sl.st.View()
	if v.LastStable != viewBefore.LastStable || v.HighWatermark != viewBefore.HighWatermark ||
		len(v.AbortedIn(0, v.LastStable)) != 1 || v.AbortedIn(0, v.LastStable)[0] != viewBefore.AbortedIn(0, v.LastStable)[0] {
		t.Fatalf("read view changed: %+v %v, was %+v %v", v, v.AbortedIn(0, v.LastStable), viewBefore, viewBefore.AbortedIn(0, v.LastStable))
	}
}
