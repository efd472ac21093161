package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/testwait"
)

// actorsAndDormant counts the manager's groups with an actor and resting.
func actorsAndDormant(m *Manager) (actors, dormant int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.actors), len(m.mu.dormant)
}

func commitSimple(t *testing.T, m *Manager, group, topic string, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, group, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset}}}}
	resp := await(t, func(r func(*kmsg.OffsetCommitResponse)) { m.CommitOffsets(req, r) })
	wantCode(t, "commit "+group, resp.Topics[0].Partitions[0].ErrorCode, nil)
}

func fetched(t *testing.T, m *Manager, group, topic string) int64 {
	t.Helper()
	resp := await(t, func(r func(kmsg.OffsetFetchResponseGroup)) {
		m.FetchOffsets(group, FetchQuery{Topics: []FetchTopic{{Topic: topic, Partitions: []int32{0}}}}, r)
	})
	return resp.Topics[0].Partitions[0].Offset
}

// TestIdleGroupsRestWithoutActors: groups that only hold offsets rest
// without an actor once their requests are answered; a request, an expiry
// pass or a deleted topic wakes the ones it concerns, each exactly as an
// actor would have served it; a group with members keeps its actor until
// they leave; a reopened manager loads idle groups resting.
func TestIdleGroupsRestWithoutActors(t *testing.T) {
	sys := quietSystem(t)
	dir := t.TempDir()
	m := openManager(t, sys, dir)
	for i := range 50 {
		topic := "a"
		if i%2 == 1 {
			topic = "b"
		}
		commitSimple(t, m, fmt.Sprintf("idle-%02d", i), topic, int64(i))
	}
	testwait.For(t, "idle groups rest", testwait.Default, func() bool {
		a, d := actorsAndDormant(m)
		return a == 0 && d == 50
	})
	if n := len(m.ListGroups()); n != 50 {
		t.Fatalf("%d groups listed, want 50", n)
	}
	// A read wakes one group, which answers and rests again.
	if off := fetched(t, m, "idle-07", "b"); off != 7 {
		t.Fatalf("idle-07 fetched %d, want 7", off)
	}
	d := await(t, func(r func(kmsg.DescribeGroupsResponseGroup)) { m.DescribeGroup("idle-08", r) })
	if d.ErrorCode != 0 || d.State != "Empty" {
		t.Fatalf("describe idle-08: %+v", d)
	}
	commitSimple(t, m, "idle-09", "b", 900)
	if off := fetched(t, m, "idle-09", "b"); off != 900 {
		t.Fatalf("idle-09 fetched %d after a second commit, want 900", off)
	}
	testwait.For(t, "woken groups rest again", testwait.Default, func() bool {
		a, d := actorsAndDormant(m)
		return a == 0 && d == 50
	})

	// A group with a member keeps its actor until the member leaves.
	j := await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(joinReq(""), Client{ID: "c"}, r) })
	j = await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(joinReq(j.MemberID), Client{ID: "c"}, r) })
	if j.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = "g", j.MemberID, j.Generation
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: j.MemberID, MemberAssignment: []byte("A")}}
	if sr := await(t, func(r func(*kmsg.SyncGroupResponse)) { m.SyncGroup(sreq, r) }); sr.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	if a, _ := actorsAndDormant(m); a != 1 {
		t.Fatalf("%d actors with one member in group g, want 1", a)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: j.MemberID}}
	if lr := await(t, func(r func(*kmsg.LeaveGroupResponse)) { m.LeaveGroup(leave, r) }); lr.ErrorCode != 0 || lr.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %+v", lr)
	}
	testwait.For(t, "g rests once its member left", testwait.Default, func() bool {
		a, d := actorsAndDormant(m)
		return a == 0 && d == 51
	})

	// Deleting topic a wakes the groups with offsets on it and drops
	// those offsets.
	m.TopicsDeleted("a")
	testwait.For(t, "topic a's offsets dropped", testwait.Default, func() bool {
		for i := 0; i < 50; i += 2 {
			if fetched(t, m, fmt.Sprintf("idle-%02d", i), "a") != -1 {
				return false
			}
		}
		return true
	})
	if off := fetched(t, m, "idle-01", "b"); off != 1 {
		t.Fatalf("idle-01 fetched %d after topic a went, want 1", off)
	}

	// Reopened: loaded resting, and served from there. The groups left
	// with no offsets are gone (only tombstones remain of them).
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, sys, dir)
	defer m.Close()
	if a, d := actorsAndDormant(m); a != 0 || d != 26 {
		t.Fatalf("reopened: %d actors, %d resting, want 0 and 26 (25 groups with offsets on b, and g)", a, d)
	}
	if off := fetched(t, m, "idle-09", "b"); off != 900 {
		t.Fatalf("reopened idle-09 fetched %d, want 900", off)
	}

	// An expiry pass wakes the groups it expires and deletes them.
	m.cfg.OffsetsRetention = time.Nanosecond
	m.ExpireOffsets()
	deadline := time.Now().Add(testwait.Default)
	for {
		a, d := actorsAndDormant(m)
		l := m.ListGroups()
		if a == 0 && d == 0 && len(l) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired groups not deleted: %d actors, %d resting, listed %v", a, d, l)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := await(t, func(r func(kmsg.DescribeGroupsResponseGroup)) { m.DescribeGroup("idle-09", r) }).ErrorCode; code != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe an expired group: %v", kerr.ErrorForCode(code))
	}
}

// TestGroupBudgetRefusesNewGroups: with MaxGroups 10, ten groups are made
// and an eleventh is refused with POLICY_VIOLATION, by OffsetCommit and by
// JoinGroup alike, while the ten go on committing; once one is deleted, a
// new group fits.
func TestGroupBudgetRefusesNewGroups(t *testing.T) {
	sys := quietSystem(t)
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	m, err := NewManager(Options{DataDir: t.TempDir(), Root: sys.Root, Config: &cfg, MaxGroups: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 10 {
		commitSimple(t, m, fmt.Sprintf("kept-%d", i), "t", int64(i))
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "one-too-many", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	resp := await(t, func(r func(*kmsg.OffsetCommitResponse)) { m.CommitOffsets(req, r) })
	wantCode(t, "commit to an eleventh group", resp.Topics[0].Partitions[0].ErrorCode, kerr.PolicyViolation)
	join := joinReq("")
	join.Group = "one-too-many"
	j := await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(join, Client{ID: "c"}, r) })
	wantCode(t, "join an eleventh group", j.ErrorCode, kerr.PolicyViolation)
	if held, limit := m.Held(); held != 10 || limit != 10 {
		t.Fatalf("held %d of %d, want 10 of 10", held, limit)
	}
	commitSimple(t, m, "kept-3", "t", 33)
	if off := fetched(t, m, "kept-3", "t"); off != 33 {
		t.Fatalf("kept-3 fetched %d, want 33", off)
	}
	del := await(t, func(r func(kmsg.DeleteGroupsResponseGroup)) { m.DeleteGroup("kept-0", r) })
	wantCode(t, "delete kept-0", del.ErrorCode, nil)
	testwait.For(t, "kept-0 gone", testwait.Default, func() bool {
		held, _ := m.Held()
		return held == 9
	})
	commitSimple(t, m, "one-too-many", "t", 1)
}

// TestIdleConsumerGroupsRest: a KIP-848 group whose last member left
// rests without an actor, keeping its group epoch; the next member's
// heartbeat wakes it and is served from there, and the group keeps its
// actor while that member is in it.
func TestIdleConsumerGroupsRest(t *testing.T) {
	sys := quietSystem(t)
	m := openManager(t, sys, t.TempDir())
	topics := fakeTopics{}
	topics.add("t", 3)
	beat := func(member string, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch = "kip848", member, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 30000
			req.SubscribedTopicNames = []string{"t"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp := await(t, func(r func(*kmsg.ConsumerGroupHeartbeatResponse)) {
			m.ConsumerGroupHeartbeat(req, Client{ID: "c", Host: "/127.0.0.1"}, topics, r)
		})
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat %s epoch %d: %v", member, epoch, kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	first := beat("m1", 0)
	if a, d := actorsAndDormant(m); a != 1 || d != 0 {
		t.Fatalf("with a member: %d actors, %d resting", a, d)
	}
	beat("m1", -1) // leaves
	testwait.For(t, "the empty KIP-848 group rests", testwait.Default, func() bool {
		a, d := actorsAndDormant(m)
		return a == 0 && d == 1
	})
	if l := m.ListGroups(); len(l) != 1 || l[0].Group != "kip848" {
		t.Fatalf("listed %+v", l)
	}
	second := beat("m2", 0)
	if second.MemberEpoch <= first.MemberEpoch {
		t.Fatalf("woken group answered epoch %d after %d: its epoch was lost", second.MemberEpoch, first.MemberEpoch)
	}
	if a, d := actorsAndDormant(m); a != 1 || d != 0 {
		t.Fatalf("woken with a member: %d actors, %d resting", a, d)
	}
}
