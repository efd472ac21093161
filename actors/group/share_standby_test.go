package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/cluster/clustertest"
)

// TestManagerShareFailover: a share group's membership replicates to a
// standby coordinator, which serves it once activated: same epochs,
// members and assignments, members heartbeat on without a rebalance.
func TestManagerShareFailover(t *testing.T) {
	sys := quietSystem(t)
	r := clustertest.New(t, 2)
	a := openReplManager(t, sys, r.Node(0), false)
	b := openReplManager(t, sys, r.Node(1), true)
	topics := fakeTopics{}
	topics.add("t", 3)
	for _, m := range []string{"m1", "m2"} {
		if resp := shareBeat(t, a, topics, "sg", m, 0, "t"); resp.ErrorCode != 0 {
			t.Fatalf("join %s: %v", m, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	if resp := shareBeat(t, a, topics, "sg", "m1", 1); resp.ErrorCode != 0 || resp.MemberEpoch != 2 {
		t.Fatalf("m1 heartbeat %+v", resp)
	}
	before := await(t, func(r func(kmsg.ShareGroupDescribeResponseGroup)) { a.ShareGroupDescribe("sg", r) })

	r.SetLeader(1)
	a.Deactivate()
	must(t, b.Activate())
	if c := await(t, func(r func(int16)) { a.ShareMember("sg", "m1", r) }); c != kerr.NotCoordinator.Code {
		t.Fatalf("deposed coordinator answers %v", kerr.ErrorForCode(c))
	}
	after := await(t, func(r func(kmsg.ShareGroupDescribeResponseGroup)) { b.ShareGroupDescribe("sg", r) })
	if after.ErrorCode != 0 || after.GroupEpoch != before.GroupEpoch || len(after.Members) != 2 {
		t.Fatalf("describe after failover %+v", after)
	}
	for i := range after.Members {
		x, y := before.Members[i], after.Members[i]
		if x.MemberID != y.MemberID || x.MemberEpoch != y.MemberEpoch || len(x.Assignment.TopicPartitions) != len(y.Assignment.TopicPartitions) ||
			(len(x.Assignment.TopicPartitions) > 0 && len(x.Assignment.TopicPartitions[0].Partitions) != len(y.Assignment.TopicPartitions[0].Partitions)) {
			t.Fatalf("member %d before %+v after %+v", i, x, y)
		}
	}
	if resp := shareBeat(t, b, topics, "sg", "m2", 2); resp.ErrorCode != 0 || resp.MemberEpoch != 2 {
		t.Fatalf("m2 heartbeat on the new coordinator %+v", resp)
	}
	if c := await(t, func(r func(int16)) { b.ShareMember("sg", "m1", r) }); c != 0 {
		t.Fatalf("m1 on the new coordinator: %v", kerr.ErrorForCode(c))
	}
	if l := b.ListGroups(); len(l) != 1 || l[0].Type != "share" {
		t.Fatalf("list after failover %+v", l)
	}
}
