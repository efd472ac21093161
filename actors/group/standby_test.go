package group

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/cluster/clustertest"
	"github.com/regent-broker/regent/interop/testwait"
)

func openReplManager(t *testing.T, sys *actor.ActorSystem, repl cluster.Replicator, standby bool) *Manager {
	t.Helper()
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	m, err := NewManager(Options{DataDir: t.TempDir(), Root: sys.Root, Config: &cfg, Repl: repl, Standby: standby,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func commitReq(group, member string, gen int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, group, member, gen
	md := "meta"
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 3, Offset: offset, LeaderEpoch: 2, Metadata: &md}}}}
	return req
}

func commit(t *testing.T, m *Manager, req *kmsg.OffsetCommitRequest) int16 {
	t.Helper()
	return await(t, func(r func(*kmsg.OffsetCommitResponse)) { m.CommitOffsets(req, r) }).Topics[0].Partitions[0].ErrorCode
}

func fetch(t *testing.T, m *Manager, group string) kmsg.OffsetFetchResponseGroup {
	t.Helper()
	return await(t, func(r func(kmsg.OffsetFetchResponseGroup)) { m.FetchOffsets(group, FetchQuery{MemberEpoch: -1}, r) })
}

func heartbeat(t *testing.T, m *Manager, member string, gen int32) int16 {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = "g", member, gen
	return await(t, func(r func(*kmsg.HeartbeatResponse)) { m.Heartbeat(req, r) }).ErrorCode
}

// joinAndSync makes a one-member group g in generation 1 and returns the
// member id.
func joinAndSync(t *testing.T, m *Manager) string {
	t.Helper()
	c := Client{ID: "cl", Host: "/127.0.0.1"}
	j := await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(joinReq(""), c, r) })
	wantCode(t, "first join", j.ErrorCode, kerr.MemberIDRequired)
	j = await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(joinReq(j.MemberID), c, r) })
	if j.ErrorCode != 0 || j.Generation != 1 {
		t.Fatalf("join %+v", j)
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = "g", j.MemberID, 1
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: j.MemberID, MemberAssignment: []byte("A")}}
	s := await(t, func(r func(*kmsg.SyncGroupResponse)) { m.SyncGroup(sreq, r) })
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("sync %+v", s)
	}
	return j.MemberID
}

// checkNotCoordinator checks that every API of m answers NOT_COORDINATOR.
func checkNotCoordinator(t *testing.T, m *Manager) {
	t.Helper()
	c := Client{ID: "cl"}
	want := kerr.NotCoordinator
	j := await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(joinReq(""), c, r) })
	wantCode(t, "join", j.ErrorCode, want)
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = "g", "m", 1
	wantCode(t, "sync", await(t, func(r func(*kmsg.SyncGroupResponse)) { m.SyncGroup(sreq, r) }).ErrorCode, want)
	wantCode(t, "heartbeat", heartbeat(t, m, "m", 1), want)
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Group = "g"
	wantCode(t, "leave", await(t, func(r func(*kmsg.LeaveGroupResponse)) { m.LeaveGroup(lreq, r) }).ErrorCode, want)
	wantCode(t, "commit", commit(t, m, commitReq("g", "", -1, 1)), want)
	wantCode(t, "fetch", fetch(t, m, "g").ErrorCode, want)
	dreq := kmsg.NewPtrOffsetDeleteRequest()
	dreq.Group = "g"
	wantCode(t, "offset delete", await(t, func(r func(*kmsg.OffsetDeleteResponse)) { m.DeleteOffsets(dreq, r) }).ErrorCode, want)
	wantCode(t, "describe", await(t, func(r func(kmsg.DescribeGroupsResponseGroup)) { m.DescribeGroup("g", r) }).ErrorCode, want)
	wantCode(t, "delete", await(t, func(r func(kmsg.DeleteGroupsResponseGroup)) { m.DeleteGroup("g", r) }).ErrorCode, want)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group = "cg"
	wantCode(t, "cg heartbeat", await(t, func(r func(*kmsg.ConsumerGroupHeartbeatResponse)) {
		m.ConsumerGroupHeartbeat(hb, c, fakeTopics{}, r)
	}).ErrorCode, want)
	wantCode(t, "cg describe", await(t, func(r func(kmsg.ConsumerGroupDescribeResponseGroup)) { m.ConsumerGroupDescribe("cg", r) }).ErrorCode, want)
	treq := kmsg.NewPtrTxnOffsetCommitRequest()
	treq.Group, treq.ProducerID, treq.Generation = "g", 7, -1
	treq.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	tr := await(t, func(r func(*kmsg.TxnOffsetCommitResponse)) { m.TxnCommitOffsets(treq, r) })
	wantCode(t, "txn commit", tr.Topics[0].Partitions[0].ErrorCode, want)
	if err := await(t, func(r func(error)) { m.CompleteTxn("g", 7, true, r) }); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("complete txn: %v", err)
	}
	if got := m.ListGroups(); len(got) != 0 {
		t.Fatalf("standby lists %+v", got)
	}
}

// TestManagerFailover: a standby manager applies the active one's records
// and, activated, serves its groups and offsets; leadership moves back and
// forth.
func TestManagerFailover(t *testing.T) {
	sys := quietSystem(t)
	r := clustertest.New(t, 2)
	a := openReplManager(t, sys, r.Node(0), false)
	b := openReplManager(t, sys, r.Node(1), true)
	checkNotCoordinator(t, b)

	id := joinAndSync(t, a)
	wantCode(t, "commit", commit(t, a, commitReq("g", id, 1, 1234)), nil)
	wantCode(t, "simple commit", commit(t, a, commitReq("flink", "", -1, 9)), nil)
	if got := b.store.Groups(); len(got["g"]) == 0 || len(got["flink"]) == 0 {
		t.Fatalf("standby store holds %v", got)
	}

	// Node 1 leads; until a is told, its writes fail as NOT_COORDINATOR.
	r.SetLeader(1)
	wantCode(t, "commit on a deposed leader", commit(t, a, commitReq("g", id, 1, 1300)), kerr.NotCoordinator)
	a.Deactivate()
	a.Deactivate()
	must(t, b.Activate())
	must(t, b.Activate())
	checkNotCoordinator(t, a)

	f := fetch(t, b, "g")
	if f.ErrorCode != 0 || len(f.Topics) != 1 || f.Topics[0].Partitions[0].Offset != 1234 || *f.Topics[0].Partitions[0].Metadata != "meta" || f.Topics[0].Partitions[0].LeaderEpoch != 2 {
		t.Fatalf("fetch after failover %+v", f)
	}
	d := await(t, func(r func(kmsg.DescribeGroupsResponseGroup)) { b.DescribeGroup("g", r) })
	if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != id || string(d.Members[0].MemberAssignment) != "A" {
		t.Fatalf("describe after failover %+v", d)
	}
	wantCode(t, "heartbeat after failover", heartbeat(t, b, id, 1), nil)
	wantCode(t, "stale generation after failover", heartbeat(t, b, id, 2), kerr.IllegalGeneration)
	if got := b.ListGroups(); len(got) != 2 {
		t.Fatalf("list after failover %+v", got)
	}

	// b commits; leadership comes back to a, which sees what b wrote
	// while a was on standby.
	wantCode(t, "commit on b", commit(t, b, commitReq("g", id, 1, 5678)), nil)
	r.SetLeader(0)
	b.Deactivate()
	must(t, a.Activate())
	checkNotCoordinator(t, b)
	if f := fetch(t, a, "g"); f.ErrorCode != 0 || f.Topics[0].Partitions[0].Offset != 5678 {
		t.Fatalf("fetch after failing back %+v", f)
	}
	wantCode(t, "heartbeat after failing back", heartbeat(t, a, id, 1), nil)

	// Close from standby and from active both work; Activate after Close
	// does not.
	must(t, b.Close())
	if err := b.Activate(); err == nil {
		t.Fatal("activated a closed manager")
	}
	must(t, a.Close())
	must(t, a.Close())
}

// TestManagerDeactivateAnswersWaiters: requests held in a group (a join
// waiting for the rebalance, a commit whose write is in flight) are
// answered NOT_COORDINATOR when the manager deactivates, without waiting
// for the replicator.
func TestManagerDeactivateAnswersWaiters(t *testing.T) {
	sys := quietSystem(t)
	r := clustertest.New(t, 2)
	a := openReplManager(t, sys, r.Node(0), false)
	b := openReplManager(t, sys, r.Node(1), true)
	id := joinAndSync(t, a)

	// A second member's join waits for the first to rejoin.
	c := Client{ID: "cl2"}
	j := await(t, func(r func(*kmsg.JoinGroupResponse)) { a.JoinGroup(joinReq(""), c, r) })
	wantCode(t, "second member's first join", j.ErrorCode, kerr.MemberIDRequired)
	joined := make(chan *kmsg.JoinGroupResponse, 1)
	a.JoinGroup(joinReq(j.MemberID), c, func(resp *kmsg.JoinGroupResponse) { joined <- resp })

	// A commit whose write never comes back.
	r.SetStall(true)
	committed := make(chan *kmsg.OffsetCommitResponse, 1)
	a.CommitOffsets(commitReq("flink", "", -1, 1), func(resp *kmsg.OffsetCommitResponse) { committed <- resp })
	testwait.For(t, "the commit to be held", testwait.Default, func() bool { return r.HeldCount() == 1 })
	select {
	case resp := <-joined:
		t.Fatalf("join answered early: %+v", resp)
	case resp := <-committed:
		t.Fatalf("commit answered early: %+v", resp)
	case <-time.After(50 * time.Millisecond):
	}

	start := time.Now()
	a.Deactivate()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("deactivate took %v", d)
	}
	select {
	case resp := <-joined:
		wantCode(t, "waiting join", resp.ErrorCode, kerr.NotCoordinator)
	case <-time.After(time.Second):
		t.Fatal("waiting join not answered")
	}
	select {
	case resp := <-committed:
		wantCode(t, "commit in flight", resp.Topics[0].Partitions[0].ErrorCode, kerr.NotCoordinator)
	case <-time.After(time.Second):
		t.Fatal("commit in flight not answered")
	}

	// The write lands after all (its outcome was unknown); b, activated
	// once everything committed is applied, serves it.
	r.SetStall(false)
	r.SetLeader(1)
	r.Release()
	testwait.For(t, "the commit applied on b", testwait.Default, func() bool { return len(b.store.Groups()["flink"]) > 0 })
	must(t, b.Activate())
	if f := fetch(t, b, "flink"); f.ErrorCode != 0 || f.Topics[0].Partitions[0].Offset != 1 {
		t.Fatalf("fetch of the late write %+v", f)
	}
	wantCode(t, "heartbeat", heartbeat(t, b, id, 1), nil)
}

// TestStandbyClose: a manager that never served opens and closes, and
// loads nothing until activated.
func TestStandbyClose(t *testing.T) {
	sys := quietSystem(t)
	dir := t.TempDir()
	m := openManager(t, sys, dir)
	wantCode(t, "commit", commit(t, m, commitReq("flink", "", -1, 42)), nil)
	must(t, m.Close())

	cfg := DefaultConfig()
	m, err := NewManager(Options{DataDir: dir, Root: sys.Root, Config: &cfg, Standby: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	must(t, err)
	checkNotCoordinator(t, m)
	must(t, m.Activate())
	if f := fetch(t, m, "flink"); f.ErrorCode != 0 || f.Topics[0].Partitions[0].Offset != 42 {
		t.Fatalf("fetch %+v", f)
	}
	must(t, m.Close())
}

func TestPersistCmdRoundTrip(t *testing.T) {
	h := newHarness(t, testConfig())
	ref := h.join("")
	h.advance(4 * time.Second)
	_ = h.joinResp(ref)
	recs := append([]Record(nil), h.records...)
	recs = append(recs,
		offsetRec("g", "t", 0, 10), metaRec("g2", 3),
		Record{Kind: RecOffsetTombstone, Group: "g", Topic: "t", Partition: 1},
		Record{Kind: RecTxnOffset, Group: "g", Topic: "t", Partition: 2, ProducerID: 9, Offset: Offset{Offset: 5, LeaderEpoch: -1, CommitTime: time.UnixMilli(1_700_000_000_000)}},
		Record{Kind: RecTxnOffsetTombstone, Group: "g", Topic: "t", Partition: 2, ProducerID: 9},
		Record{Kind: RecConsumerGroup, Group: "g3"},
		Record{Kind: RecGroupTombstone, Group: "g2"},
	)
	orig := &persistCmd{recs: recs}
	kind, payload, err := cluster.EncodeCommand(orig)
	must(t, err)
	if kind != "group.persist" {
		t.Fatalf("kind %q", kind)
	}
	cmd, err := cluster.DecodeCommand(kind, bytes.Clone(payload))
	must(t, err)
	got := cmd.(*persistCmd)
	if len(got.recs) != len(recs) {
		t.Fatalf("%d records decoded of %d", len(got.recs), len(recs))
	}
	if again := (&persistCmd{recs: got.recs}).AppendCommand(nil); !bytes.Equal(again, payload) {
		t.Fatal("decoded records encode differently")
	}
	if again := got.AppendCommand(nil); !bytes.Equal(again, payload) {
		t.Fatal("a decoded command re-encodes differently")
	}

	// Applying the decoded command writes what applying the original
	// does.
	s1, _, err := OpenStore(filepath.Join(t.TempDir(), "a"), false, nil)
	must(t, err)
	s2, _, err := OpenStore(filepath.Join(t.TempDir(), "b"), false, nil)
	must(t, err)
	if res := s1.Apply(orig); res != nil {
		t.Fatal(res)
	}
	if res := s2.Apply(got); res != nil {
		t.Fatal(res)
	}
	if s1.Size() != s2.Size() || len(s1.Groups()) != len(s2.Groups()) {
		t.Fatalf("stores differ: %d/%d bytes", s1.Size(), s2.Size())
	}
	must(t, s1.Close())
	must(t, s2.Close())

	for n := range len(payload) {
		if _, err := cluster.DecodeCommand(kind, payload[:n]); err == nil {
			t.Fatalf("a payload cut at %d bytes decoded", n)
		}
	}
	bad := bytes.Clone(payload)
	bad[len(bad)/2] ^= 0xff
	if _, err := cluster.DecodeCommand(kind, bad); err == nil {
		t.Fatal("a corrupt payload decoded")
	}
}
