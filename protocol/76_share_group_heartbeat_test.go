package protocol

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// idleShareCore turns share groups on for membership tests; the data path
// is never called by them.
type idleShareCore struct{ ShareCore }

func shareHeartbeatReq(group, member string, epoch int32, subs ...string) *kmsg.ShareGroupHeartbeatRequest {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, subs
	return req
}

// TestShareGroupMembershipAPIs: ShareGroupHeartbeat and ShareGroupDescribe
// on the wire, and how ListGroups, DescribeGroups, DeleteGroups,
// JoinGroup and ConsumerGroupHeartbeat answer for a share group.
func TestShareGroupMembershipAPIs(t *testing.T) {
	s := groupServer(t)
	hb := func(req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
		return call[*kmsg.ShareGroupHeartbeatResponse](t, s, req)
	}
	code(t, "share groups off", hb(shareHeartbeatReq("sg", "m1", 0, "t")).ErrorCode, kerr.UnsupportedVersion)
	s.SetShare(idleShareCore{}, nil)

	code(t, "long member id", hb(shareHeartbeatReq("sg", strings.Repeat("m", 37), 0, "t")).ErrorCode, kerr.InvalidRequest)
	r := hb(shareHeartbeatReq("sg", "m1", 0, "t"))
	code(t, "join", r.ErrorCode, nil)
	id, _, _ := registryTopics{s, nil}.Topic("t")
	if r.MemberID == nil || *r.MemberID != "m1" || r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 5000 || r.Assignment == nil ||
		len(r.Assignment.TopicPartitions) != 1 || r.Assignment.TopicPartitions[0].TopicID != id || len(r.Assignment.TopicPartitions[0].Partitions) != 3 {
		t.Fatalf("join %+v", r)
	}
	r = hb(shareHeartbeatReq("sg", "m2", 0, "t"))
	code(t, "second join", r.ErrorCode, nil)
	r = hb(shareHeartbeatReq("sg", "m1", 1))
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || r.Assignment == nil {
		t.Fatalf("m1 after m2 joined %+v", r)
	}
	code(t, "fenced", hb(shareHeartbeatReq("sg", "m1", 7)).ErrorCode, kerr.FencedMemberEpoch)

	dreq := kmsg.NewPtrShareGroupDescribeRequest()
	dreq.Version = 1
	dreq.GroupIDs = []string{"sg", "nope", ""}
	dreq.IncludeAuthorizedOperations = true
	d := call[*kmsg.ShareGroupDescribeResponse](t, s, dreq)
	g := d.Groups[0]
	if g.ErrorCode != 0 || g.GroupState != "Stable" || g.GroupEpoch != 2 || g.Assignor != "simple" || len(g.Members) != 2 ||
		g.Members[0].Assignment.TopicPartitions[0].Topic != "t" || g.Members[0].ClientID != "test" || g.AuthorizedOperations != groupOperations {
		t.Fatalf("describe %+v", g)
	}
	code(t, "describe a missing group", d.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	code(t, "describe an empty id", d.Groups[2].ErrorCode, kerr.InvalidGroupID)

	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 5
	lreq.TypesFilter = []string{"Share"}
	l := call[*kmsg.ListGroupsResponse](t, s, lreq)
	if len(l.Groups) != 1 || l.Groups[0].Group != "sg" || l.Groups[0].GroupType != "share" || l.Groups[0].ProtocolType != "share" || l.Groups[0].GroupState != "Stable" {
		t.Fatalf("list share groups %+v", l.Groups)
	}
	lreq.TypesFilter = []string{"consumer", "classic"}
	if l := call[*kmsg.ListGroupsResponse](t, s, lreq); len(l.Groups) != 0 {
		t.Fatalf("a share group listed as another type: %+v", l.Groups)
	}

	for _, v := range []int16{5, 6} {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version = v
		dg.Groups = []string{"sg"}
		got := call[*kmsg.DescribeGroupsResponse](t, s, dg).Groups[0]
		want := kerr.GroupIDNotFound
		if v < 6 {
			want = nil
		}
		code(t, "classic describe of a share group", got.ErrorCode, want)
		if got.State != "Dead" {
			t.Fatalf("v%d classic describe of a share group: %+v", v, got)
		}
	}
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Version = 9
	jreq.Group, jreq.ProtocolType = "sg", "consumer"
	jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = 10_000, 10_000
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	code(t, "JoinGroup of a share group", call[*kmsg.JoinGroupResponse](t, s, jreq).ErrorCode, kerr.InconsistentGroupProtocol)
	creq := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	creq.Version = 1
	creq.Group, creq.MemberID, creq.RebalanceTimeoutMillis, creq.SubscribedTopicNames = "sg", "c1", 30_000, []string{"t"}
	creq.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	code(t, "ConsumerGroupHeartbeat to a share group", call[*kmsg.ConsumerGroupHeartbeatResponse](t, s, creq).ErrorCode, kerr.GroupIDNotFound)
	code(t, "share heartbeat to the share group still works", hb(shareHeartbeatReq("sg", "m2", 2)).ErrorCode, nil)

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	del.Groups = []string{"sg"}
	code(t, "delete with members", call[*kmsg.DeleteGroupsResponse](t, s, del).Groups[0].ErrorCode, kerr.NonEmptyGroup)
	code(t, "m1 leaves", hb(shareHeartbeatReq("sg", "m1", -1)).ErrorCode, nil)
	code(t, "m2 leaves", hb(shareHeartbeatReq("sg", "m2", -1)).ErrorCode, nil)
	code(t, "delete the empty group", call[*kmsg.DeleteGroupsResponse](t, s, del).Groups[0].ErrorCode, nil)
	dreq.GroupIDs = []string{"sg"}
	code(t, "describe after delete", call[*kmsg.ShareGroupDescribeResponse](t, s, dreq).Groups[0].ErrorCode, kerr.GroupIDNotFound)
}
