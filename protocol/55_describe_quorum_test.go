package protocol

import (
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func describeQuorumReq(version int16, topic string, partitions ...int32) *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = version
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// onlyPartition returns the answer's one partition, failing unless the
// answer is of __cluster_metadata-0 alone.
func onlyPartition(t *testing.T, resp *kmsg.DescribeQuorumResponse) kmsg.DescribeQuorumResponseTopicPartition {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Topic != "__cluster_metadata" || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 0 {
		t.Fatalf("answer %+v, want __cluster_metadata-0 alone", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// TestDescribeQuorumSingleNode: a single node is the leader and only
// voter, at epoch 0 with no raft log (high watermark and log end 0),
// fetched and caught up now, at every version; v2 names its listener.
func TestDescribeQuorumSingleNode(t *testing.T) {
	s := groupServer(t)
	for v := int16(0); v <= 2; v++ {
		before := time.Now().UnixMilli()
		resp := call[*kmsg.DescribeQuorumResponse](t, s, describeQuorumReq(v, "__cluster_metadata", 0))
		p := onlyPartition(t, resp)
		if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch != 0 || p.HighWatermark != 0 || len(p.CurrentVoters) != 1 || len(p.Observers) != 0 {
			t.Fatalf("v%d: %+v", v, p)
		}
		voter := p.CurrentVoters[0]
		if voter.ReplicaID != 1 || voter.LogEndOffset != 0 || voter.ReplicaDirectoryID != [16]byte{} {
			t.Fatalf("v%d voter %+v", v, voter)
		}
		if v >= 1 && (voter.LastFetchTimestamp < before || voter.LastCaughtUpTimestamp < before) {
			t.Fatalf("v%d voter %+v: the leader's timestamps are not now (%d)", v, voter, before)
		}
		switch {
		case v < 2 && len(resp.Nodes) != 0:
			t.Fatalf("v%d nodes %+v", v, resp.Nodes)
		case v == 2 && (len(resp.Nodes) != 1 || resp.Nodes[0].NodeID != 1 || len(resp.Nodes[0].Listeners) != 1 ||
			!reflect.DeepEqual(resp.Nodes[0].Listeners[0], kmsg.DescribeQuorumResponseNodeListener{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092})):
			t.Fatalf("v2 nodes %+v", resp.Nodes)
		}
	}
}

// TestDescribeQuorumOtherPartitions: anything but __cluster_metadata-0
// alone is answered UNKNOWN_TOPIC_OR_PARTITION on each partition named.
func TestDescribeQuorumOtherPartitions(t *testing.T) {
	s := groupServer(t)
	for _, req := range []*kmsg.DescribeQuorumRequest{
		describeQuorumReq(2, "t", 0),
		describeQuorumReq(1, "__cluster_metadata", 1),
		describeQuorumReq(0, "__cluster_metadata", 0, 0),
	} {
		resp := call[*kmsg.DescribeQuorumResponse](t, s, req)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Topic != req.Topics[0].Topic || len(resp.Topics[0].Partitions) != len(req.Topics[0].Partitions) {
			t.Fatalf("%+v: answered %+v", req.Topics, resp)
		}
		for i, p := range resp.Topics[0].Partitions {
			if p.Partition != req.Topics[0].Partitions[i].Partition || p.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(p.CurrentVoters) != 0 {
				t.Fatalf("%+v: partition %+v, want UNKNOWN_TOPIC_OR_PARTITION", req.Topics, p)
			}
		}
	}
	req := describeQuorumReq(2, "__cluster_metadata", 0)
	req.Topics = append(req.Topics, kmsg.DescribeQuorumRequestTopic{Topic: "t", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}})
	resp := call[*kmsg.DescribeQuorumResponse](t, s, req)
	if len(resp.Topics) != 2 || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("two topics: %+v", resp.Topics)
	}
}

// TestDescribeQuorumAuthorization: DESCRIBE on the cluster is needed.
func TestDescribeQuorumAuthorization(t *testing.T) {
	var allowAll atomic.Bool
	s, store, obs := aclServer(t, &allowAll)
	resp := call[*kmsg.DescribeQuorumResponse](t, s, describeQuorumReq(2, "__cluster_metadata", 0))
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Topics) != 0 || obs.count("DESCRIBE/CLUSTER") != 1 {
		t.Fatalf("without an ACL: %+v, denials %v; want CLUSTER_AUTHORIZATION_FAILED", resp, obs.n)
	}
	if err := store.Create([]acls.ACL{anon(acls.Cluster, acls.Literal, acls.ClusterName, acls.Describe, acls.Allow)}); err != nil {
		t.Fatal(err)
	}
	if p := onlyPartition(t, call[*kmsg.DescribeQuorumResponse](t, s, describeQuorumReq(2, "__cluster_metadata", 0))); p.ErrorCode != 0 || p.LeaderID != 1 {
		t.Fatalf("with DESCRIBE on the cluster: %+v", p)
	}
}

// quorumView is a fakeView that describes a quorum.
type quorumView struct {
	*fakeView
	q QuorumInfo
}

func (v *quorumView) DescribeQuorum() QuorumInfo { return v.q }

// TestDescribeQuorumCluster: the leader reports its tracked progress
// (unknown log ends -1, never-seen times -1) and each voter's address;
// sent to a follower, the request is answered by the leader; a node
// that neither leads nor forwards answers NOT_LEADER_OR_FOLLOWER.
func TestDescribeQuorumCluster(t *testing.T) {
	leader, follower, _, sent := forwardPair(t)
	fetched, caught := time.UnixMilli(1_700_000_000_123), time.UnixMilli(1_700_000_000_100)
	q := QuorumInfo{LeaderID: 1, LeaderEpoch: 7, HighWatermark: 41, Leader: true, Voters: []QuorumVoter{
		{ID: 1, LogEndOffset: 42, LastFetch: fetched, LastCaughtUp: fetched, Addr: BrokerAddr{ID: 1, Host: "127.0.0.1", Port: 9092}},
		{ID: 2, LogEndOffset: 40, LastFetch: fetched, LastCaughtUp: caught, Addr: BrokerAddr{ID: 2, Host: "127.0.0.1", Port: 9093}},
		{ID: 3, LogEndOffset: -1, Addr: BrokerAddr{ID: 3, Port: -1}},
	}}
	leader.cluster = &quorumView{fakeView: leader.cluster.(*fakeView), q: q}
	check := func(s *Server, forwards int32) {
		t.Helper()
		resp := call[*kmsg.DescribeQuorumResponse](t, s, describeQuorumReq(2, "__cluster_metadata", 0))
		p := onlyPartition(t, resp)
		if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch != 7 || p.HighWatermark != 41 || len(p.CurrentVoters) != 3 {
			t.Fatalf("partition %+v", p)
		}
		want := []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{
			{ReplicaID: 1, LogEndOffset: 42, LastFetchTimestamp: fetched.UnixMilli(), LastCaughtUpTimestamp: fetched.UnixMilli()},
			{ReplicaID: 2, LogEndOffset: 40, LastFetchTimestamp: fetched.UnixMilli(), LastCaughtUpTimestamp: caught.UnixMilli()},
			{ReplicaID: 3, LogEndOffset: -1, LastFetchTimestamp: -1, LastCaughtUpTimestamp: -1},
		}
		for i, v := range p.CurrentVoters {
			if !reflect.DeepEqual(v, want[i]) {
				t.Fatalf("voter %d: %+v, want %+v", i, v, want[i])
			}
		}
		if len(resp.Nodes) != 3 || len(resp.Nodes[1].Listeners) != 1 || resp.Nodes[1].Listeners[0].Port != 9093 || len(resp.Nodes[2].Listeners) != 0 {
			t.Fatalf("nodes %+v: want node 2 at 9093, node 3 without an address", resp.Nodes)
		}
		if sent.Load() != forwards {
			t.Fatalf("%d forwards, want %d", sent.Load(), forwards)
		}
	}
	check(leader, 0)
	check(follower, 1)

	// No forwarder, not leading: Kafka's non-leader answer.
	follower.SetForwarder(nil)
	follower.cluster = &quorumView{fakeView: follower.cluster.(*fakeView), q: QuorumInfo{LeaderID: 1, LeaderEpoch: 7, Voters: []QuorumVoter{{ID: 1}, {ID: 2}}}}
	p := onlyPartition(t, call[*kmsg.DescribeQuorumResponse](t, follower, describeQuorumReq(1, "__cluster_metadata", 0)))
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.LeaderID != 1 || p.LeaderEpoch != 7 || len(p.CurrentVoters) != 0 {
		t.Fatalf("a follower that cannot forward: %+v, want NOT_LEADER_OR_FOLLOWER naming leader 1", p)
	}
}

// TestDescribeQuorumListener: the voters' listener takes the name of the
// client's listener and each voter's address on it.
func TestDescribeQuorumListener(t *testing.T) {
	r := &Request{Conn: &ConnInfo{Listener: &Listener{
		Name:       "SASL_SSL",
		Advertised: BrokerAddr{ID: 1, Host: "a.example", Port: 9443},
		Peer: func(id int32) (BrokerAddr, bool) {
			return BrokerAddr{ID: id, Host: "b.example", Port: 9444}, id == 2
		},
	}}}
	resp := kmsg.NewPtrDescribeQuorumResponse()
	for id := int32(1); id <= 3; id++ {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = id
		n.Listeners = []kmsg.DescribeQuorumResponseNodeListener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9091 + id)}}
		resp.Nodes = append(resp.Nodes, n)
	}
	r.advertiseListener(resp)
	want := []kmsg.DescribeQuorumResponseNodeListener{
		{Name: "SASL_SSL", Host: "a.example", Port: 9443},
		{Name: "SASL_SSL", Host: "b.example", Port: 9444},
		{Name: "SASL_SSL", Host: "127.0.0.1", Port: 9094}, // no address known on it: the registered one
	}
	for i, n := range resp.Nodes {
		if !reflect.DeepEqual(n.Listeners[0], want[i]) {
			t.Errorf("node %d: %+v, want %+v", n.NodeID, n.Listeners[0], want[i])
		}
	}
}
