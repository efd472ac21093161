package protocol

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// staticGroup is a raft group's view that tests set.
type staticGroup struct {
	leader, epoch int32
	serving       bool
	isr           []int32
}

func (g staticGroup) Leader() int32      { return g.leader }
func (g staticGroup) LeaderEpoch() int32 { return g.epoch }
func (g staticGroup) Serving() bool      { return g.serving }
func (g staticGroup) InSync() []int32    { return g.isr }

// groupsView is the view of node 1 in a two-node cluster with partition
// groups: its own methods are the metadata group's (staticGroup), groups
// the partition groups'.
type groupsView struct {
	staticGroup
	groups map[uint8]staticGroup
}

func (v groupsView) Brokers() []BrokerAddr {
	return []BrokerAddr{{ID: 1, Host: "127.0.0.1", Port: 9092}, {ID: 2, Host: "127.0.0.1", Port: 9093}}
}
func (v groupsView) Voters() []int32   { return []int32{1, 2} }
func (v groupsView) ClusterID() string { return "c" }

func (v groupsView) Group(g uint8) GroupView {
	if gv, ok := v.groups[g]; ok {
		return gv
	}
	return v.staticGroup
}

// TestPartitionGroups: with t's partition 1 on raft group 1 and its
// others on the metadata group, each partition answers as its group:
// Metadata names the group's leader, epoch and ISR; Produce is taken only
// for a group this node leads, a refusal naming the group's leader and
// epoch; Fetch checks the client's leader epoch against the group's term.
func TestPartitionGroups(t *testing.T) {
	s := groupServer(t)
	tp := s.topics.Get("t")
	// Set before any request is served (no reader yet): the registry
	// places partitions only when running partition groups.
	tp.Groups = []uint8{0, 1, 0}
	meta := staticGroup{leader: 1, epoch: 3, serving: true, isr: []int32{1, 2}}
	s.cluster = groupsView{staticGroup: meta, groups: map[uint8]staticGroup{
		1: {leader: 2, epoch: 7, isr: []int32{2}},
	}}

	if g := s.partitionGroup(tp, 1); g.Leader() != 2 || g.LeaderEpoch() != 7 || g.Serving() {
		t.Fatalf("partition 1's group: leader %d, epoch %d, serving %v; want 2, 7, false", g.Leader(), g.LeaderEpoch(), g.Serving())
	}
	if g := s.partitionGroup(tp, 0); g.Leader() != 1 || g.LeaderEpoch() != 3 || !g.Serving() {
		t.Fatalf("partition 0's group: leader %d, epoch %d, serving %v; want 1, 3, true", g.Leader(), g.LeaderEpoch(), g.Serving())
	}

	mt := metadataTopics(t, s, "t")
	if len(mt) != 1 || len(mt[0].Partitions) != 3 {
		t.Fatalf("metadata of t: %+v", mt)
	}
	for _, mp := range mt[0].Partitions {
		leader, epoch, isr := int32(1), int32(3), []int32{1, 2}
		if mp.Partition == 1 {
			leader, epoch, isr = 2, 7, []int32{2}
		}
		if mp.ErrorCode != 0 || mp.Leader != leader || mp.LeaderEpoch != epoch || !slices.Equal(mp.ISR, isr) {
			t.Fatalf("metadata of t-%d: leader %d, epoch %d, ISR %v, error %d; want %d, %d, %v", mp.Partition, mp.Leader, mp.LeaderEpoch, mp.ISR, mp.ErrorCode, leader, epoch, isr)
		}
		// The replicas are in the registry's order: its preferred leader
		// first, as ElectLeaders reads it.
		if want := tp.ReplicaOrder(mp.Partition, []int32{1, 2}); !slices.Equal(mp.Replicas, want) {
			t.Fatalf("metadata of t-%d: replicas %v, want %v", mp.Partition, mp.Replicas, want)
		}
	}

	// One produce to both groups: the led one takes its batch, the other
	// points the client at its group's leader.
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(10)
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for _, p := range []int32{0, 1} {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = buildBatch(t, recordbatch.CodecNone, []recordbatch.Record{{Value: []byte("v")}})
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	pr := call[*kmsg.ProduceResponse](t, s, req)
	served, refused := pr.Topics[0].Partitions[0], pr.Topics[0].Partitions[1]
	code(t, "produce to t-0 (group 0, led here)", served.ErrorCode, nil)
	code(t, "produce to t-1 (group 1, led by node 2)", refused.ErrorCode, kerr.NotLeaderForPartition)
	if refused.CurrentLeader.LeaderID != 2 || refused.CurrentLeader.LeaderEpoch != 7 {
		t.Fatalf("t-1 refused naming leader %+v, want node 2 in epoch 7", refused.CurrentLeader)
	}
	if len(pr.Brokers) != 1 || pr.Brokers[0].NodeID != 2 || pr.Brokers[0].Port != 9093 {
		t.Fatalf("produce answer's brokers %+v, want node 2's endpoint", pr.Brokers)
	}

	fetch := func(partition, current int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes = 16, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "t", tp.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, 1<<20, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return call[*kmsg.FetchResponse](t, s, req).Topics[0].Partitions[0]
	}
	if p := fetch(1, 7); p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 2 || p.CurrentLeader.LeaderEpoch != 7 {
		t.Fatalf("fetch of t-1 from a follower of its group: %+v", p)
	}

	// Now this node leads group 1 too, in its own term.
	s.cluster = groupsView{staticGroup: meta, groups: map[uint8]staticGroup{
		1: {leader: 1, epoch: 7, serving: true, isr: []int32{1, 2}},
	}}
	code(t, "fetch of t-1 in group 1's epoch", fetch(1, 7).ErrorCode, nil)
	code(t, "fetch of t-1 in group 0's epoch", fetch(1, 3).ErrorCode, kerr.FencedLeaderEpoch)
	code(t, "fetch of t-0 in group 0's epoch", fetch(0, 3).ErrorCode, nil)
	code(t, "fetch of t-0 in group 1's epoch", fetch(0, 7).ErrorCode, kerr.UnknownLeaderEpoch)
	if p := fetch(0, 0); p.CurrentLeader.LeaderID != 1 || p.CurrentLeader.LeaderEpoch != 3 {
		t.Fatalf("fenced fetch of t-0 names %+v, want node 1 in epoch 3", p.CurrentLeader)
	}
}

// moverView is a groupsView that records the leadership moves asked.
type moverView struct {
	groupsView
	moved [][2]int32 // group, node
}

func (v *moverView) MoveLeadership(_ context.Context, g uint8, id int32) error {
	v.moved = append(v.moved, [2]int32{int32(g), id})
	return nil
}

// TestElectLeadersPerGroup: a preferred election moves the leadership of
// the partition's own group, to the node it prefers; partitions whose
// group's leader is their preferred one need none.
func TestElectLeadersPerGroup(t *testing.T) {
	s := groupServer(t)
	tp := s.topics.Get("t")
	// Set before any request is served, as in TestPartitionGroups.
	tp.Groups = []uint8{0, 1, 0}
	tp.Assignments = [][]int32{{1, 2}, {2, 1}, {1, 2}}
	// Group 1 is led by the node t-1 does not prefer (the registry
	// decides which it prefers), the metadata group by the one t-0 and
	// t-2 prefer.
	preferred := tp.ReplicaOrder(1, []int32{1, 2})[0]
	v := &moverView{groupsView: groupsView{
		staticGroup: staticGroup{leader: 1, epoch: 3, serving: true, isr: []int32{1, 2}},
		groups:      map[uint8]staticGroup{1: {leader: 3 - preferred, epoch: 7, serving: preferred == 2, isr: []int32{1, 2}}},
	}}
	s.cluster = v

	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = 2, electPreferred, 5000
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0, 1, 2}
	req.Topics = append(req.Topics, rt)
	resp := call[*kmsg.ElectLeadersResponse](t, s, req)
	for _, p := range resp.Topics[0].Partitions {
		want := kerr.ElectionNotNeeded
		if p.Partition == 1 {
			want = nil
		}
		code(t, "election of t-"+strconv.Itoa(int(p.Partition)), p.ErrorCode, want)
	}
	if !slices.Equal(v.moved, [][2]int32{{1, preferred}}) {
		t.Fatalf("moves %v, want group 1 to node %d", v.moved, preferred)
	}
}
