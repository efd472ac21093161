package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/actors/topics"
)

// groupServer is a Server with a topic "t" (3 partitions) and a group
// coordinator without the initial rebalance delay.
func groupServer(t *testing.T) *Server { t.Helper(); return groupServerOn(t, nil) }

// groupServerOn is groupServer with its topics replicated by repl (nil: a
// Local replicator).
func groupServerOn(t *testing.T, repl replication.Replicator) *Server {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	dir := t.TempDir()
	reg, err := topics.Open(topics.Options{DataDir: dir, Root: sys.Root, Logger: quiet, Repl: repl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Create(topics.CreateSpec{Name: "t", Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	cfg := group.DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	groups, err := group.NewManager(group.Options{DataDir: dir, Root: sys.Root, Config: &cfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		groups.Close()
		reg.Close()
		sys.Shutdown()
	})
	return NewServer(Config{NodeID: 1, Host: "127.0.0.1", Port: 9092, Logger: quiet}, reg, nil, groups, nil)
}

// call encodes req at its version, serves it as the network layer would
// and decodes the response frame at the same version.
func call[T kmsg.Response](t *testing.T, s *Server, req kmsg.Request) T {
	t.Helper()
	_, resp := serveRequest[T](t, s, req)
	return resp
}

// serveRequest is call that also returns the served Request.
func serveRequest[T kmsg.Response](t *testing.T, s *Server, req kmsg.Request) (*Request, T) {
	t.Helper()
	r := decodeRequest(t, s, req)
	r.Conn = &ConnInfo{RemoteAddr: "10.1.2.3:5555"}
	got := make(chan []byte, 1)
	r.SetReply(func(f []byte) { got <- f })
	s.Serve(r)
	var out []byte
	select {
	case out = <-got:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s v%d: no response", kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	rest := out[8:]
	if resp.IsFlexible() {
		rest = rest[1:]
	}
	if err := resp.ReadFrom(rest); err != nil {
		t.Fatalf("%s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return r, resp.(T)
}

func code(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestClassicGroupEveryVersion runs a member's whole life (find the
// coordinator, join, sync, heartbeat, commit, fetch, describe, list,
// leave, delete) at every served version of each API.
func TestClassicGroupEveryVersion(t *testing.T) {
	s := groupServer(t)
	for v := int16(0); v <= 9; v++ {
		name := fmt.Sprintf("g%d", v)
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version = min(v, 6)
		fc.CoordinatorKey, fc.CoordinatorKeys = name, []string{name}
		fr := call[*kmsg.FindCoordinatorResponse](t, s, fc)
		if fc.Version >= 4 {
			if len(fr.Coordinators) != 1 || fr.Coordinators[0].NodeID != 1 || fr.Coordinators[0].Port != 9092 {
				t.Fatalf("v%d coordinators %+v", fc.Version, fr.Coordinators)
			}
		} else if fr.NodeID != 1 || fr.Host != "127.0.0.1" {
			t.Fatalf("v%d coordinator %+v", fc.Version, fr)
		}

		join := kmsg.NewPtrJoinGroupRequest()
		join.Version = v
		join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = name, 10_000, 10_000
		join.ProtocolType = "consumer"
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 0}}}
		jr := call[*kmsg.JoinGroupResponse](t, s, join)
		if v >= 4 {
			code(t, "first join", jr.ErrorCode, kerr.MemberIDRequired)
			join.MemberID = jr.MemberID
			jr = call[*kmsg.JoinGroupResponse](t, s, join)
		}
		code(t, fmt.Sprintf("join v%d", v), jr.ErrorCode, nil)
		if jr.Generation != 1 || jr.LeaderID != jr.MemberID || jr.Protocol == nil || *jr.Protocol != "range" || len(jr.Members) != 1 {
			t.Fatalf("join v%d: %+v", v, jr)
		}
		member := jr.MemberID

		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Version = min(v, 5)
		sync.Group, sync.MemberID, sync.Generation = name, member, 1
		sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("A")}}
		sr := call[*kmsg.SyncGroupResponse](t, s, sync)
		code(t, "sync", sr.ErrorCode, nil)
		if string(sr.MemberAssignment) != "A" {
			t.Fatalf("sync v%d: %+v", sync.Version, sr)
		}

		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version = min(v, 4)
		hb.Group, hb.MemberID, hb.Generation = name, member, 1
		code(t, "heartbeat", call[*kmsg.HeartbeatResponse](t, s, hb).ErrorCode, nil)
		hb.Generation = 0
		code(t, "old generation", call[*kmsg.HeartbeatResponse](t, s, hb).ErrorCode, kerr.IllegalGeneration)

		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version = v
		oc.Group, oc.MemberID, oc.Generation = name, member, 1
		md := "meta"
		oc.Topics = []kmsg.OffsetCommitRequestTopic{
			{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 100 + int64(v), LeaderEpoch: -1, Metadata: &md, Timestamp: -1}, {Partition: 9, Offset: 1}}},
			{Topic: "nope", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
		}
		or := call[*kmsg.OffsetCommitResponse](t, s, oc)
		want := (*kerr.Error)(nil)
		if v == 0 {
			// v0 has no member id: a commit without membership, which an
			// active group refuses.
			want = kerr.UnknownMemberID
		}
		code(t, "commit", or.Topics[0].Partitions[0].ErrorCode, want)
		code(t, "commit to a missing partition", or.Topics[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)
		code(t, "commit to a missing topic", or.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)

		for fv := int16(0); fv <= 10; fv++ {
			if v == 0 {
				break
			}
			of := kmsg.NewPtrOffsetFetchRequest()
			of.Version = fv
			of.Group = name
			of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{1, 2}}}
			id := s.topics.Get("t").ID
			of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: name, MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", TopicID: id, Partitions: []int32{1, 2}}}}}
			resp := call[*kmsg.OffsetFetchResponse](t, s, of)
			var p1, p2 kmsg.OffsetFetchResponseGroupTopicPartition
			if fv >= 8 {
				ps := resp.Groups[0].Topics[0].Partitions
				p1, p2 = ps[0], ps[1]
				if fv >= 10 && resp.Groups[0].Topics[0].TopicID != id {
					t.Fatalf("fetch v10 without the topic id")
				}
			} else {
				ps := resp.Topics[0].Partitions
				p1 = kmsg.OffsetFetchResponseGroupTopicPartition{Offset: ps[0].Offset, Metadata: ps[0].Metadata}
				p2 = kmsg.OffsetFetchResponseGroupTopicPartition{Offset: ps[1].Offset}
			}
			if p1.Offset != 100+int64(v) || *p1.Metadata != "meta" || p2.Offset != -1 {
				t.Fatalf("fetch v%d after commit v%d: %+v %+v", fv, v, p1, p2)
			}
			if fv >= 2 && fv < 8 {
				of.Topics = nil // all topics
				if all := call[*kmsg.OffsetFetchResponse](t, s, of); len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 1 {
					t.Fatalf("fetch all v%d: %+v", fv, all.Topics)
				}
			}
		}

		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version = min(v, 6)
		dg.Groups = []string{name, "missing"}
		dr := call[*kmsg.DescribeGroupsResponse](t, s, dg)
		g0, g1 := dr.Groups[0], dr.Groups[1]
		if g0.State != "Stable" || g0.Protocol != "range" || len(g0.Members) != 1 || g0.Members[0].ClientHost != "/10.1.2.3" || g0.Members[0].ClientID != "test" || string(g0.Members[0].MemberAssignment) != "A" {
			t.Fatalf("describe v%d: %+v", dg.Version, g0)
		}
		wantMissing := (*kerr.Error)(nil)
		if dg.Version >= 6 {
			wantMissing = kerr.GroupIDNotFound
		}
		code(t, "describe missing", g1.ErrorCode, wantMissing)
		if g1.State != "Dead" {
			t.Fatalf("missing group state %q", g1.State)
		}

		lg := kmsg.NewPtrListGroupsRequest()
		lg.Version = min(v, 5)
		found := false
		for _, g := range call[*kmsg.ListGroupsResponse](t, s, lg).Groups {
			if g.Group == name {
				found = g.ProtocolType == "consumer" && (lg.Version < 4 || g.GroupState == "Stable") && (lg.Version < 5 || g.GroupType == "classic")
			}
		}
		if !found {
			t.Fatalf("list v%d: %s missing or wrong", lg.Version, name)
		}

		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Version = min(v, 3)
		del.Groups = []string{name}
		code(t, "delete active", call[*kmsg.DeleteGroupsResponse](t, s, del).Groups[0].ErrorCode, kerr.NonEmptyGroup)

		od := kmsg.NewPtrOffsetDeleteRequest()
		od.Group = name
		od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}, {Topic: "nope", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		odr := call[*kmsg.OffsetDeleteResponse](t, s, od)
		code(t, "offset delete, subscribed", odr.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
		code(t, "offset delete, missing topic", odr.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)

		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Version = min(v, 5)
		lv.Group, lv.MemberID = name, member
		lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
		lr := call[*kmsg.LeaveGroupResponse](t, s, lv)
		code(t, "leave", lr.ErrorCode, nil)
		code(t, "leave again", call[*kmsg.LeaveGroupResponse](t, s, lv).ErrorCode, func() *kerr.Error {
			if lv.Version < 3 {
				return kerr.UnknownMemberID
			}
			return nil
		}())

		code(t, "delete empty", call[*kmsg.DeleteGroupsResponse](t, s, del).Groups[0].ErrorCode, nil)
		code(t, "delete again", call[*kmsg.DeleteGroupsResponse](t, s, del).Groups[0].ErrorCode, kerr.GroupIDNotFound)
	}
}

func TestSimpleCommitV0(t *testing.T) {
	s := groupServer(t)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version = 0
	oc.Group = "simple"
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	code(t, "v0 commit", call[*kmsg.OffsetCommitResponse](t, s, oc).Topics[0].Partitions[0].ErrorCode, nil)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 0
	of.Group = "simple"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if got := call[*kmsg.OffsetFetchResponse](t, s, of).Topics[0].Partitions[0].Offset; got != 5 {
		t.Fatalf("fetched %d", got)
	}
}

func TestConsumerGroupHeartbeatAndDescribe(t *testing.T) {
	s := groupServer(t)
	for v := int16(0); v <= 1; v++ {
		name := fmt.Sprintf("cg%d", v)
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version = v
		hb.Group = name
		if v >= 1 {
			hb.MemberID = "client-made-id"
		}
		hb.RebalanceTimeoutMillis = 30_000
		hb.SubscribedTopicNames = []string{"t"}
		hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp := call[*kmsg.ConsumerGroupHeartbeatResponse](t, s, hb)
		code(t, "join", resp.ErrorCode, nil)
		if resp.MemberID == nil || *resp.MemberID == "" || resp.MemberEpoch != 1 || resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || len(resp.Assignment.Topics[0].Partitions) != 3 || resp.HeartbeatIntervalMillis != 5000 {
			t.Fatalf("v%d join: %+v", v, resp)
		}
		if resp.Assignment.Topics[0].TopicID != s.topics.Get("t").ID {
			t.Fatal("assignment names the wrong topic id")
		}
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Version = v
		d.Groups = []string{name, "missing"}
		dr := call[*kmsg.ConsumerGroupDescribeResponse](t, s, d)
		if g := dr.Groups[0]; g.State != "Stable" || g.Epoch != 1 || len(g.Members) != 1 || g.Members[0].Assignment.TopicPartitions[0].Topic != "t" {
			t.Fatalf("describe v%d: %+v", v, g)
		}
		code(t, "describe missing", dr.Groups[1].ErrorCode, kerr.GroupIDNotFound)
		lg := kmsg.NewPtrListGroupsRequest()
		lg.Version = 5
		lg.TypesFilter = []string{"CONSUMER"}
		if got := call[*kmsg.ListGroupsResponse](t, s, lg).Groups; len(got) != int(v)+1 || got[v].GroupState != "Stable" {
			t.Fatalf("list consumer groups: %+v", got)
		}
		hb.MemberID, hb.MemberEpoch = *resp.MemberID, -1
		code(t, "leave", call[*kmsg.ConsumerGroupHeartbeatResponse](t, s, hb).ErrorCode, nil)
	}
}

// decodeRequest frames req as a client would and decodes it with s.
func decodeRequest(t *testing.T, s *Server, req kmsg.Request) *Request {
	t.Helper()
	var frame []byte
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, 7)
	frame = binary.BigEndian.AppendUint16(frame, 4)
	frame = append(frame, "test"...)
	if req.IsFlexible() {
		frame = append(frame, 0)
	}
	frame = req.AppendTo(frame)
	h, body, err := ParseHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Decode(h, body)
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return r
}
