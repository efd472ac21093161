package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (h *harness) txnCommit(pid int64, topic string, off int64) int16 {
	h.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Group, req.ProducerID, req.Generation = "g", pid, -1
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: off, LeaderEpoch: -1}}}}
	ref := h.ref()
	h.apply(h.g.TxnCommitOffsets(h.now, ref, req))
	return h.replies[ref].(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (h *harness) completeTxn(pid int64, commit bool) {
	h.t.Helper()
	ref := h.ref()
	h.apply(h.g.CompleteTxn(h.now, ref, pid, commit))
	if h.replies[ref].(*kmsg.EndTxnResponse).ErrorCode != 0 {
		h.t.Fatal("complete failed")
	}
}

func TestTxnOffsets(t *testing.T) {
	h := newHarness(t, testConfig())
	h.commit("", -1, 8, map[string]int64{"t": 1})
	wantCode(t, "stage", h.txnCommit(7, "t", 50), nil)
	wantCode(t, "stage other producer", h.txnCommit(8, "u", 60), nil)
	q := FetchQuery{Topics: []FetchTopic{{Topic: "t", Partitions: []int32{0}}}, MemberEpoch: -1}
	if got := h.fetch(q).Topics[0].Partitions[0]; got.Offset != 1 || got.ErrorCode != 0 {
		t.Fatalf("staged offset visible: %+v", got)
	}
	q.RequireStable = true
	wantCode(t, "require stable", h.fetch(q).Topics[0].Partitions[0].ErrorCode, kerr.UnstableOffsetCommit)
	wantCode(t, "delete with a transaction open", h.deleteGroup(), kerr.NonEmptyGroup)

	// Restart with both transactions open.
	g := NewGroup("g", &h.cfg)
	g.Restore(h.records, h.now)
	h.g = g
	wantCode(t, "still unstable after restore", h.fetch(q).Topics[0].Partitions[0].ErrorCode, kerr.UnstableOffsetCommit)

	h.completeTxn(7, true)
	if got := h.fetch(q).Topics[0].Partitions[0]; got.Offset != 50 || got.ErrorCode != 0 {
		t.Fatalf("after commit: %+v", got)
	}
	h.completeTxn(7, true) // again: harmless
	h.completeTxn(8, false)
	if _, ok := h.g.Committed("u", 0); ok {
		t.Fatal("aborted offset committed")
	}
	g = NewGroup("g", &h.cfg)
	g.Restore(h.records, h.now)
	if o, _ := g.Committed("t", 0); o.Offset != 50 || len(g.pendingTxn) != 0 {
		t.Fatalf("after restore: %+v pending %d", o, len(g.pendingTxn))
	}
	h.g = g
	wantCode(t, "delete", h.deleteGroup(), nil)
}

func TestTxnOffsetsValidation(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	ids := h.stableGroup(1)
	// Without member information: taken in any state.
	wantCode(t, "anonymous", h.txnCommit(1, "t", 5), nil)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Group, req.ProducerID, req.Generation, req.MemberID = "g", 1, 5, ids[0]
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 6}}}}
	ref := h.ref()
	h.apply(h.g.TxnCommitOffsets(h.now, ref, req))
	wantCode(t, "wrong generation", h.replies[ref].(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)
}
