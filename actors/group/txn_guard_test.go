package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnGuard: offsets checked with a remote transaction coordinator are
// staged only if no completion of their producer (or one sharing its
// bucket) was sent since the guard was read; refused ones get a retriable
// code and change nothing.
func TestTxnGuard(t *testing.T) {
	m := openManager(t, quietSystem(t), t.TempDir())
	defer m.Close()
	stage := func(pid int64, off int64, guard uint64) int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 3
		req.TransactionalID, req.Group, req.ProducerID, req.Generation = "tx", "g", pid, -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: off, LeaderEpoch: -1}}}}
		resp := await(t, func(reply func(*kmsg.TxnOffsetCommitResponse)) { m.TxnCommitOffsetsGuarded(req, guard, reply) })
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	complete := func(pid int64, commit bool) {
		t.Helper()
		if err := await(t, func(reply func(error)) { m.CompleteTxn("g", pid, commit, reply) }); err != nil {
			t.Fatal(err)
		}
	}
	committed := func() int64 {
		t.Helper()
		q := FetchQuery{Topics: []FetchTopic{{Topic: "t", Partitions: []int32{0}}}, MemberEpoch: -1}
		g := await(t, func(reply func(kmsg.OffsetFetchResponseGroup)) { m.FetchOffsets("g", q, reply) })
		return g.Topics[0].Partitions[0].Offset
	}

	// Guard read, nothing ended since: staged, and committed with the
	// transaction.
	guard := m.TxnGuard(7)
	wantCode(t, "stage under a fresh guard", stage(7, 10, guard), nil)
	complete(7, true)
	if got := committed(); got != 10 {
		t.Fatalf("committed %d, want 10", got)
	}

	// The transaction ended between the check and the staging: refused,
	// retriably, and nothing is pending afterwards.
	guard = m.TxnGuard(7)
	complete(7, false)
	wantCode(t, "stage after the transaction ended", stage(7, 20, guard), kerr.CoordinatorLoadInProgress)
	complete(7, true) // a later transaction's commit finds nothing of it
	if got := committed(); got != 10 {
		t.Fatalf("committed %d after a refused staging, want 10", got)
	}

	// Another producer's completion in another bucket does not refuse.
	guard = m.TxnGuard(7)
	complete(8, true)
	wantCode(t, "stage after another producer's completion", stage(7, 30, guard), nil)
	// One in the same bucket does (the client retries).
	guard = m.TxnGuard(7)
	complete(7+txnGuardBuckets, false)
	wantCode(t, "stage after a same-bucket completion", stage(7, 40, guard), kerr.CoordinatorLoadInProgress)
	complete(7, true)
	if got := committed(); got != 30 {
		t.Fatalf("committed %d, want 30", got)
	}
}
