package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSimpleCommitCreatesGroup(t *testing.T) {
	h := newHarness(t, testConfig())
	// Flink's source and admin clients: no member id, generation -1.
	resp := h.commit("", -1, 8, map[string]int64{"t1": 42, "t2": 7})
	wantCode(t, "simple commit", commitCode(t, resp), nil)
	if !h.g.Live() || h.g.state != Empty || h.g.protocolType != "" {
		t.Fatalf("live %v state %v type %q", h.g.Live(), h.g.state, h.g.protocolType)
	}
	got := h.fetch(FetchQuery{Topics: []FetchTopic{{Topic: "t1", Partitions: []int32{0, 1}}}, MemberEpoch: -1})
	p0, p1 := got.Topics[0].Partitions[0], got.Topics[0].Partitions[1]
	if p0.Offset != 42 || p0.LeaderEpoch != 7 || *p0.Metadata != "md-t1" {
		t.Fatalf("fetched %+v", p0)
	}
	if p1.Offset != -1 || p1.LeaderEpoch != -1 || *p1.Metadata != "" {
		t.Fatalf("uncommitted partition %+v", p1)
	}
	all := h.fetch(FetchQuery{MemberEpoch: -1})
	if len(all.Topics) != 2 || all.Topics[0].Topic != "t1" || all.Topics[1].Partitions[0].Offset != 7 {
		t.Fatalf("all offsets %+v", all.Topics)
	}
	// v0 commit (no generation field, so -1) still works on an empty group.
	wantCode(t, "v0", commitCode(t, h.commit("", -1, 0, map[string]int64{"t1": 43})), nil)
	if o, _ := h.g.Committed("t1", 0); o.Offset != 43 {
		t.Fatalf("offset %d", o.Offset)
	}
}

func TestCommitValidation(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	wantCode(t, "unknown group, generation, v8", commitCode(t, h.commit("m", 1, 8, map[string]int64{"t": 1})), kerr.IllegalGeneration)
	wantCode(t, "unknown group, generation, v9", commitCode(t, h.commit("m", 1, 9, map[string]int64{"t": 1})), kerr.GroupIDNotFound)
	if h.g.Live() {
		t.Fatal("refused commit created the group")
	}
	ids := h.stableGroup(2)
	for _, tc := range []struct {
		name   string
		member string
		gen    int32
		want   *kerr.Error
	}{
		{"member", ids[1], 1, nil},
		{"wrong generation", ids[1], 2, kerr.IllegalGeneration},
		{"unknown member", "nobody", 1, kerr.UnknownMemberID},
		{"simple commit to an active group", "", -1, kerr.UnknownMemberID},
	} {
		wantCode(t, tc.name, commitCode(t, h.commit(tc.member, tc.gen, 8, map[string]int64{"t": 5})), tc.want)
	}
	// During PreparingRebalance members may still commit (the revoke-time
	// commit); in CompletingRebalance they must wait for their assignment.
	r := h.join("")
	wantCode(t, "preparing", commitCode(t, h.commit(ids[0], 1, 8, map[string]int64{"t": 6})), nil)
	h.join(ids[0])
	h.join(ids[1])
	if h.g.state != CompletingRebalance {
		t.Fatalf("state %v", h.g.state)
	}
	wantCode(t, "completing", commitCode(t, h.commit(ids[0], 2, 8, map[string]int64{"t": 7})), kerr.RebalanceInProgress)
	_ = r

	big := make([]byte, 5000)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "g2", -1
	md := string(big)
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, Metadata: &md}}}}
	h2 := newHarness(t, cfg)
	ref := h2.ref()
	h2.apply(h2.g.CommitOffsets(h2.now, ref, req))
	wantCode(t, "metadata too large", commitCode(t, h2.replies[ref].(*kmsg.OffsetCommitResponse)), kerr.OffsetMetadataTooLarge)
}

func TestCommitAppliedOnlyWhenPersisted(t *testing.T) {
	h := newHarness(t, testConfig())
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "g", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 9}}}}
	eff := h.g.CommitOffsets(h.now, 1, req)
	if _, ok := h.g.Committed("t", 0); ok {
		t.Fatal("offset visible before it was persisted")
	}
	if len(eff.Records) != 1 || eff.Records[0].Kind != RecOffset {
		t.Fatalf("records %+v", eff.Records)
	}
	h.g.Applied(eff.Records)
	if o, ok := h.g.Committed("t", 0); !ok || o.Offset != 9 {
		t.Fatal("offset not applied")
	}
}

func TestFetchMissingGroup(t *testing.T) {
	h := newHarness(t, testConfig())
	got := h.fetch(FetchQuery{Topics: []FetchTopic{{Topic: "t", Partitions: []int32{0}}}, MemberEpoch: -1})
	if got.ErrorCode != 0 || got.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("%+v", got)
	}
	member := "m"
	got = h.fetch(FetchQuery{MemberID: &member, MemberEpoch: 3})
	wantCode(t, "member fetch of missing group", got.ErrorCode, kerr.GroupIDNotFound)
}

func consumerMetadata(topics ...string) string {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 0
	md.Topics = topics
	return string(md.AppendTo(nil))
}

func (h *harness) deleteOffsets(topics ...string) *kmsg.OffsetDeleteResponse {
	h.t.Helper()
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	for _, topic := range topics {
		req.Topics = append(req.Topics, kmsg.OffsetDeleteRequestTopic{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
	}
	ref := h.ref()
	h.apply(h.g.DeleteOffsets(h.now, ref, req))
	return h.replies[ref].(*kmsg.OffsetDeleteResponse)
}

func TestOffsetDelete(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	wantCode(t, "missing group", h.deleteOffsets("a").ErrorCode, kerr.GroupIDNotFound)

	ids := h.stableGroup(1, withMetadata(consumerMetadata("a")))
	h.commit(ids[0], 1, 8, map[string]int64{"a": 1, "b": 2})
	resp := h.deleteOffsets("a", "b")
	wantCode(t, "group", resp.ErrorCode, nil)
	wantCode(t, "subscribed", resp.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantCode(t, "not subscribed", resp.Topics[1].Partitions[0].ErrorCode, nil)
	if _, ok := h.g.Committed("b", 0); ok {
		t.Fatal("offset of b not deleted")
	}
	if _, ok := h.g.Committed("a", 0); !ok {
		t.Fatal("offset of a deleted")
	}

	// A non-consumer group with members can't say what it uses.
	h2 := newHarness(t, cfg)
	h2.stableGroup(1, withType("connect"))
	wantCode(t, "connect group", h2.deleteOffsets("a").ErrorCode, kerr.NonEmptyGroup)
}

func (h *harness) deleteGroup() int16 {
	h.t.Helper()
	ref := h.ref()
	h.apply(h.g.Delete(h.now, ref))
	return h.replies[ref].(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
}

func TestDeleteGroup(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	wantCode(t, "missing", h.deleteGroup(), kerr.GroupIDNotFound)
	ids := h.stableGroup(1)
	h.commit(ids[0], 1, 8, map[string]int64{"a": 1, "b": 2})
	wantCode(t, "active", h.deleteGroup(), kerr.NonEmptyGroup)
	h.leave(kmsg.LeaveGroupRequestMember{MemberID: ids[0]})
	n := len(h.records)
	wantCode(t, "empty", h.deleteGroup(), nil)
	if h.g.Live() {
		t.Fatal("group still exists")
	}
	kinds := []RecordKind{}
	for _, r := range h.records[n:] {
		kinds = append(kinds, r.Kind)
	}
	if len(kinds) != 3 || kinds[2] != RecGroupTombstone {
		t.Fatalf("deletion records %v", kinds)
	}
}

func TestExpireOffsets(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	cfg.OffsetsRetention = time.Hour
	h := newHarness(t, cfg)
	ids := h.stableGroup(1, withMetadata(consumerMetadata("a")), withTimeouts(10*time.Minute, time.Minute))
	h.commit(ids[0], 1, 8, map[string]int64{"a": 1, "b": 2})
	for i := 0; i < 6; i++ {
		h.advance(5 * time.Minute)
		wantCode(t, "heartbeat", h.heartbeat(ids[0], 1), nil)
	}
	h.apply(h.g.ExpireOffsets(h.now))
	if _, ok := h.g.Committed("b", 0); !ok {
		t.Fatal("expired too early")
	}
	for i := 0; i < 8; i++ {
		h.advance(5 * time.Minute)
		wantCode(t, "heartbeat", h.heartbeat(ids[0], 1), nil)
	}
	h.apply(h.g.ExpireOffsets(h.now))
	if _, ok := h.g.Committed("b", 0); ok {
		t.Fatal("unsubscribed topic's offset kept past retention")
	}
	if _, ok := h.g.Committed("a", 0); !ok {
		t.Fatal("subscribed topic's offset expired")
	}
	// Once empty for the retention, everything goes, and the group too.
	h.leave(kmsg.LeaveGroupRequestMember{MemberID: ids[0]})
	h.advance(59 * time.Minute)
	h.apply(h.g.ExpireOffsets(h.now))
	if !h.g.Live() {
		t.Fatal("group deleted before retention")
	}
	h.advance(time.Minute)
	h.apply(h.g.ExpireOffsets(h.now))
	if h.g.Live() {
		t.Fatal("empty group outlived its offsets")
	}
}

func TestRestore(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 0
	h := newHarness(t, cfg)
	h.cfg.InitialRebalanceDelay = time.Second
	ra := h.join("", withInstance("a"), withMetadata(consumerMetadata("t")))
	rb := h.join("", withMetadata(consumerMetadata("t")))
	h.advance(2 * time.Second)
	a, b := h.joinResp(ra).MemberID, h.joinResp(rb).MemberID
	h.sync(a, 1, map[string]string{a: "A", b: "B"})
	h.sync(b, 1, nil)
	h.commit(a, 1, 8, map[string]int64{"t": 100})

	// Replay everything persisted into a fresh group, as on startup.
	g := NewGroup("g", &h.cfg)
	g.Restore(h.records, h.now)
	checkInvariants(t, g)
	if g.state != Stable || g.generation != 1 || g.leader != a || g.protocol != "range" || len(g.members) != 2 {
		t.Fatalf("restored %v gen %d leader %s protocol %s members %d", g.state, g.generation, g.leader, g.protocol, len(g.members))
	}
	if string(g.members[b].assignment) != "B" || g.members[a].instanceID == nil || g.static["a"] != a {
		t.Fatal("members not restored")
	}
	if o, ok := g.Committed("t", 0); !ok || o.Offset != 100 || o.LeaderEpoch != 7 || o.Metadata != "md-t" {
		t.Fatalf("offset %+v", o)
	}
	// Members carry on: heartbeat, re-sync, and a static restart without
	// a rebalance.
	h.g = g
	wantCode(t, "heartbeat after restore", h.heartbeat(b, 1), nil)
	if got := h.syncResp(h.sync(b, 1, nil)); string(got.MemberAssignment) != "B" {
		t.Fatalf("sync after restore %+v", got)
	}
	j := h.joinResp(h.join("", withInstance("a"), withMetadata(consumerMetadata("t"))))
	if j.ErrorCode != 0 || g.state != Stable {
		t.Fatalf("static rejoin after restore %+v %v", j, g.state)
	}
	// Members that do not come back expire.
	h.advance(11 * time.Second)
	if len(g.members) != 0 || g.state != Empty {
		t.Fatalf("state %v members %d", g.state, len(g.members))
	}
}

func TestDropTopics(t *testing.T) {
	h := newHarness(t, testConfig())
	h.commit("", -1, 8, map[string]int64{"gone": 1, "kept": 2})
	h.txnCommit(3, "gone", 9)
	h.apply(h.g.DropTopics(h.now, map[string]bool{"gone": true}))
	if _, ok := h.g.Committed("gone", 0); ok || h.g.unstable("gone", 0) {
		t.Fatal("deleted topic's offsets kept")
	}
	if _, ok := h.g.Committed("kept", 0); !ok {
		t.Fatal("other topic's offset dropped")
	}
}
