package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitParts commits offset 1 for each partition of topic t and returns
// each partition's error code.
func (h *harness) commitParts(memberID string, epoch int32, parts ...int32) map[int32]int16 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "g", memberID, epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for _, p := range parts {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ref := h.ref()
	h.apply(h.g.CommitOffsets(h.now, ref, req))
	out := map[int32]int16{}
	for _, rp := range h.replies[ref].(*kmsg.OffsetCommitResponse).Topics[0].Partitions {
		out[rp.Partition] = rp.ErrorCode
	}
	return out
}

func (h *harness) txnCommitParts(memberID string, epoch int32, version int16, parts ...int32) map[int32]int16 {
	h.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, "g", memberID, epoch
	req.TransactionalID, req.ProducerID = "tx", 5
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	for _, p := range parts {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ref := h.ref()
	h.apply(h.g.TxnCommitOffsets(h.now, ref, req))
	out := map[int32]int16{}
	for _, rp := range h.replies[ref].(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions {
		out[rp.Partition] = rp.ErrorCode
	}
	return out
}

func wantCodes(t *testing.T, what string, got map[int32]int16, want map[int32]*kerr.Error) {
	t.Helper()
	for p, w := range want {
		var wc int16
		if w != nil {
			wc = w.Code
		}
		if got[p] != wc {
			t.Fatalf("%s: partition %d: got %v, want %v (all: %v)", what, p, kerr.ErrorForCode(got[p]), w, got)
		}
	}
}

// TestCommitAssignmentEpochs: KIP-1251. A member whose epoch a heartbeat
// moved on may still commit, at its old epoch, the partitions it held at
// that epoch (the commit a client makes while giving partitions up), and
// not the ones it never held or that moved to another member.
func TestCommitAssignmentEpochs(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 4)
	a, b := h.cgMember(topics, "a", "t"), h.cgMember(topics, "b", "t")
	mustOK(t, "a joins", a.beat())
	first := a.epoch
	if a.owned.count() != 4 {
		t.Fatalf("a owns %d partitions, want 4", a.owned.count())
	}
	mustOK(t, "b joins", b.beat())
	mustOK(t, "a told to revoke", a.beat())
	m := h.g.cg.members["a"]
	if m.pendingRevoke.count() == 0 {
		t.Fatalf("a revokes nothing: state %d", m.state)
	}
	kept, revoking := m.assigned.clone(), m.pendingRevoke.clone()
	id := topics["t"].id
	// While it revokes, its commit at the epoch it had is taken for every
	// partition it still holds, the ones being revoked too.
	all := append(append([]int32(nil), kept[id]...), revoking[id]...)
	wantAll := map[int32]*kerr.Error{}
	for _, p := range all {
		wantAll[p] = nil
	}
	wantCodes(t, "commit while revoking", h.commitParts("a", first, all...), wantAll)

	// Once b holds the revoked partitions and a's epoch moved on, a's
	// old-epoch commit is taken only for what it kept.
	mustOK(t, "a acks the revocation", a.beat())
	mustOK(t, "b takes its partitions", b.beat())
	if a.epoch <= first {
		t.Fatalf("a's epoch %d did not move past %d", a.epoch, first)
	}
	want := map[int32]*kerr.Error{}
	for _, p := range kept[id] {
		want[p] = nil
	}
	for _, p := range revoking[id] {
		want[p] = kerr.StaleMemberEpoch
	}
	wantCodes(t, "old epoch after the move", h.commitParts("a", first, all...), want)
	// b was given its partitions at its current epoch: an older one is
	// stale for all of them; the current one is taken.
	bParts := b.owned[id]
	staleAll := map[int32]*kerr.Error{}
	okAll := map[int32]*kerr.Error{}
	for _, p := range bParts {
		staleAll[p], okAll[p] = kerr.StaleMemberEpoch, nil
	}
	wantCodes(t, "b below its assignment epoch", h.commitParts("b", b.epoch-1, bParts...), staleAll)
	wantCodes(t, "b at its epoch", h.commitParts("b", b.epoch, bParts...), okAll)
	// An epoch ahead of the member's is refused whole.
	wantCodes(t, "a ahead", h.commitParts("a", a.epoch+1, kept[id]...), map[int32]*kerr.Error{kept[id][0]: kerr.StaleMemberEpoch})
	// Transactional commits follow the same rule, with their own codes.
	wantCodes(t, "txn v6 old epoch", h.txnCommitParts("a", first, 6, all...), want)
	old := map[int32]*kerr.Error{}
	for p, w := range want {
		old[p] = w
		if w != nil {
			old[p] = kerr.IllegalGeneration
		}
	}
	wantCodes(t, "txn v4 old epoch", h.txnCommitParts("a", first, 4, all...), old)

	// The assignment epochs survive the store's codec.
	snap := h.g.cg.encodeWithMembers()
	c, err := decodeConsumerGroup(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		got, orig := c.members[id].assignedAt, h.g.cg.members[id].assignedAt
		if len(got) != len(orig) {
			t.Fatalf("%s: %d assignment epochs restored, want %d", id, len(got), len(orig))
		}
		for k, e := range orig {
			if got[k] != e {
				t.Fatalf("%s: %v restored at %d, want %d", id, k, got[k], e)
			}
		}
	}
}

// TestCommitAssignmentEpochsStaticReplacement: a static member that comes
// back under a new member id takes its partitions at its new epoch, so
// the old incarnation's commits are refused.
func TestCommitAssignmentEpochsStaticReplacement(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 2)
	inst := "i"
	a := h.cgMember(topics, "a", "t")
	a.instance = &inst
	mustOK(t, "a joins", a.beat())
	mustOK(t, "a leaves for a while", a.leave(staticLeaveEpoch))
	a2 := h.cgMember(topics, "a2", "t")
	a2.instance = &inst
	mustOK(t, "a2 takes over", a2.beat())
	wantCodes(t, "old incarnation", h.commitParts("a", a.epoch, 0, 1), map[int32]*kerr.Error{0: kerr.UnknownMemberID, 1: kerr.UnknownMemberID})
	m := h.g.cg.members["a2"]
	for k, e := range m.assignedAt {
		if e != m.epoch {
			t.Fatalf("%v assigned at %d, want the new incarnation's epoch %d", k, e, m.epoch)
		}
	}
	wantCodes(t, "new incarnation", h.commitParts("a2", a2.epoch, 0, 1), map[int32]*kerr.Error{0: nil, 1: nil})
}

// TestConsumerGroupSnapshotV1 reads a version 1 snapshot (no assignment
// epochs): partitions take the member's epoch.
func TestConsumerGroupSnapshotV1(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 3)
	a := h.cgMember(topics, "a", "t")
	mustOK(t, "a joins", a.beat())
	c := h.g.cg
	// Version 2 minus the assignedAt list is version 1.
	m := c.members["a"]
	saved := m.assignedAt
	m.assignedAt = nil
	v2 := c.encodeWithMembers()
	m.assignedAt = saved
	v1 := append([]byte{1}, v2[1:len(v2)-4]...)
	got, err := decodeConsumerGroup(v1)
	if err != nil {
		t.Fatal(err)
	}
	gm := got.members["a"]
	if len(gm.assignedAt) != 3 {
		t.Fatalf("%d assignment epochs, want 3", len(gm.assignedAt))
	}
	for k, e := range gm.assignedAt {
		if e != gm.epoch {
			t.Fatalf("%v at %d, want %d", k, e, gm.epoch)
		}
	}
}
