package group

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/testwait"
)

func quietSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(sys.Shutdown)
	return sys
}

func openManager(t *testing.T, sys *actor.ActorSystem, dir string) *Manager {
	t.Helper()
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	m, err := NewManager(Options{DataDir: dir, Root: sys.Root, Config: &cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// await calls fn with a reply callback and waits for the reply.
func await[T any](t *testing.T, fn func(reply func(T))) T {
	t.Helper()
	ch := make(chan T, 1)
	fn(func(v T) { ch <- v })
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no reply within 10s")
	}
	var zero T
	return zero
}

func joinReq(member string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.MemberID = "g", member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 10_000
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(consumerMetadata("t"))}}
	return req
}

func TestManagerGroupSurvivesRestart(t *testing.T) {
	sys := quietSystem(t)
	dir := t.TempDir()
	m := openManager(t, sys, dir)
	c := Client{ID: "cl", Host: "/127.0.0.1"}

	j := await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(joinReq(""), c, r) })
	wantCode(t, "first join", j.ErrorCode, kerr.MemberIDRequired)
	j = await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(joinReq(j.MemberID), c, r) })
	if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != j.MemberID {
		t.Fatalf("join %+v", j)
	}
	id := j.MemberID
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = "g", id, 1
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: id, MemberAssignment: []byte("A")}}
	s := await(t, func(r func(*kmsg.SyncGroupResponse)) { m.SyncGroup(sreq, r) })
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("sync %+v", s)
	}
	creq := kmsg.NewPtrOffsetCommitRequest()
	creq.Version, creq.Group, creq.MemberID, creq.Generation = 9, "g", id, 1
	md := "meta"
	creq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 3, Offset: 1234, LeaderEpoch: 2, Metadata: &md}}}}
	cr := await(t, func(r func(*kmsg.OffsetCommitResponse)) { m.CommitOffsets(creq, r) })
	wantCode(t, "commit", cr.Topics[0].Partitions[0].ErrorCode, nil)
	// A simple commit to another group.
	creq2 := kmsg.NewPtrOffsetCommitRequest()
	creq2.Version, creq2.Group, creq2.Generation = 9, "flink", -1
	creq2.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 9, LeaderEpoch: -1}}}}
	cr = await(t, func(r func(*kmsg.OffsetCommitResponse)) { m.CommitOffsets(creq2, r) })
	wantCode(t, "simple commit", cr.Topics[0].Partitions[0].ErrorCode, nil)

	if got := m.ListGroups(); len(got) != 2 || got[0].Group != "flink" || got[1].State != "Stable" || got[1].ProtocolType != "consumer" {
		t.Fatalf("list %+v", got)
	}
	must(t, m.Close())

	m = openManager(t, sys, dir)
	defer m.Close()
	f := await(t, func(r func(kmsg.OffsetFetchResponseGroup)) {
		m.FetchOffsets("g", FetchQuery{MemberEpoch: -1}, r)
	})
	if len(f.Topics) != 1 || f.Topics[0].Partitions[0].Offset != 1234 || *f.Topics[0].Partitions[0].Metadata != "meta" || f.Topics[0].Partitions[0].LeaderEpoch != 2 {
		t.Fatalf("fetch after restart %+v", f)
	}
	d := await(t, func(r func(kmsg.DescribeGroupsResponseGroup)) { m.DescribeGroup("g", r) })
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != id || string(d.Members[0].MemberAssignment) != "A" {
		t.Fatalf("describe after restart %+v", d)
	}
	hreq := kmsg.NewPtrHeartbeatRequest()
	hreq.Group, hreq.MemberID, hreq.Generation = "g", id, 1
	hb := await(t, func(r func(*kmsg.HeartbeatResponse)) { m.Heartbeat(hreq, r) })
	wantCode(t, "heartbeat after restart", hb.ErrorCode, nil)

	// Leave, then delete: the group and its offsets go, durably.
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Group = "g"
	lreq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: id}}
	lr := await(t, func(r func(*kmsg.LeaveGroupResponse)) { m.LeaveGroup(lreq, r) })
	wantCode(t, "leave", lr.Members[0].ErrorCode, nil)
	del := await(t, func(r func(kmsg.DeleteGroupsResponseGroup)) { m.DeleteGroup("g", r) })
	wantCode(t, "delete", del.ErrorCode, nil)
	testwait.For(t, "the deleted group to go", testwait.Default, func() bool { return len(m.ListGroups()) == 1 })
	must(t, m.Close())
	m = openManager(t, sys, dir)
	defer m.Close()
	if got := m.ListGroups(); len(got) != 1 || got[0].Group != "flink" {
		t.Fatalf("after delete and restart: %+v", got)
	}
}

func TestManagerMissingGroupsSpawnNothing(t *testing.T) {
	sys := quietSystem(t)
	m := openManager(t, sys, t.TempDir())
	defer m.Close()
	hreq := kmsg.NewPtrHeartbeatRequest()
	hreq.Group, hreq.MemberID, hreq.Generation = "nope", "x", 1
	hb := await(t, func(r func(*kmsg.HeartbeatResponse)) { m.Heartbeat(hreq, r) })
	wantCode(t, "heartbeat", hb.ErrorCode, kerr.UnknownMemberID)
	d := await(t, func(r func(kmsg.DescribeGroupsResponseGroup)) { m.DescribeGroup("nope", r) })
	wantCode(t, "describe", d.ErrorCode, kerr.GroupIDNotFound)
	// A join that fails validation spawns an actor that then retires.
	bad := joinReq("")
	bad.Group = "bad"
	bad.SessionTimeoutMillis = 1
	j := await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(bad, Client{}, r) })
	wantCode(t, "bad join", j.ErrorCode, kerr.InvalidSessionTimeout)
	testwait.For(t, "the bad group's actor to retire", testwait.Default, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.mu.actors) == 0
	})
}

// TestManagerConcurrentGroups runs many groups at once through the actors
// (run with -race).
func TestManagerConcurrentGroups(t *testing.T) {
	sys := quietSystem(t)
	m := openManager(t, sys, t.TempDir())
	defer m.Close()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := joinReq("")
			req.Version = 3
			req.Group = "g" + string(rune('a'+i))
			j := await(t, func(r func(*kmsg.JoinGroupResponse)) { m.JoinGroup(req, Client{ID: "c"}, r) })
			if j.ErrorCode != 0 {
				t.Errorf("join %d: %v", i, kerr.ErrorForCode(j.ErrorCode))
				return
			}
			for k := 0; k < 20; k++ {
				creq := kmsg.NewPtrOffsetCommitRequest()
				creq.Version, creq.Group, creq.MemberID, creq.Generation = 8, req.Group, j.MemberID, j.Generation
				creq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: int64(k)}}}}
				cr := await(t, func(r func(*kmsg.OffsetCommitResponse)) { m.CommitOffsets(creq, r) })
				if cr.Topics[0].Partitions[0].ErrorCode != 0 {
					// CompletingRebalance until synced.
					if cr.Topics[0].Partitions[0].ErrorCode != kerr.RebalanceInProgress.Code {
						t.Errorf("commit: %v", kerr.ErrorForCode(cr.Topics[0].Partitions[0].ErrorCode))
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := len(m.ListGroups()); n != 20 {
		t.Fatalf("%d groups listed", n)
	}
}
