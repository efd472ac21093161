package protocol

// DescribeQuorum: versions 0-2. Regent's one raft group is its metadata
// quorum, described as Kafka's __cluster_metadata partition 0: the raft
// leader, its term as the leader epoch, the commit index as the high
// watermark, and each voter's replication progress as the leader tracked
// it (cluster/quorum.go): LogEndOffset is the raft index the voter is
// known to hold (-1 unknown), timestamps -1 when never seen this term. No
// observers (every node is a voter); voter directory ids are zero; v2's
// Nodes give each voter one listener, named as the listener the client
// came in on, at the voter's Kafka address there (advertiseListener), as
// Regent's voters are reached as brokers. A request naming anything but
// that one partition is answered UNKNOWN_TOPIC_OR_PARTITION for each
// partition named, as Kafka's raft client answers. Needs DESCRIBE on the
// cluster (top-level CLUSTER_AUTHORIZATION_FAILED).
//
// Kafka's brokers forward it to the active controller; a cluster follower
// forwards it to the raft leader (forward.go), so the answer always
// carries the leader's tracked progress. A node that cannot forward and
// does not lead answers NOT_LEADER_OR_FOLLOWER, as Kafka's non-leader
// controllers do. A single node answers itself as the leader and only
// voter at epoch 0, with log end and high watermark 0: it keeps no raft
// log.

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(55, 0, 2, (*Server).describeQuorum) }

// Kafka's metadata topic and partition, which DescribeQuorum names.
const (
	metadataQuorumTopic     = "__cluster_metadata"
	metadataQuorumPartition = 0
)

// quorumListenerName names the voters' listener in DescribeQuorum v2 when
// the client's listener is not known (advertiseListener renames it).
const quorumListenerName = "PLAINTEXT"

// QuorumDescriber is implemented by cluster views that know the raft
// quorum (cmd/regent's view of a raft cluster). A view without it is a
// single node.
type QuorumDescriber interface {
	DescribeQuorum() QuorumInfo
}

// QuorumInfo is the raft quorum as DescribeQuorum reports it.
type QuorumInfo struct {
	LeaderID    int32 // -1 while none is known
	LeaderEpoch int32
	// HighWatermark is the commit index.
	HighWatermark int64
	// Leader: this node leads, and Voters carry its tracked progress.
	Leader bool
	Voters []QuorumVoter
}

// QuorumVoter is one voter's progress as the leader tracked it.
type QuorumVoter struct {
	ID           int32
	LogEndOffset int64 // -1: unknown
	// LastFetch and LastCaughtUp: zero when never seen this term.
	LastFetch, LastCaughtUp time.Time
	// Addr is the voter's Kafka address (Port -1 when unknown).
	Addr BrokerAddr
}

func (s *Server) describeQuorum(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	req := r.Msg.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if !s.authorizedCluster(r, acls.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(kerr.ClusterAuthorizationFailed.Description)
		r.Respond(resp)
		return
	}
	if !namesMetadataPartition(req) {
		for _, rt := range req.Topics {
			t := kmsg.NewDescribeQuorumResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewDescribeQuorumResponseTopicPartition()
				p.Partition, p.LeaderID = rp.Partition, -1
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
				p.ErrorMessage = kmsg.StringPtr(kerr.UnknownTopicOrPartition.Description)
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		r.Respond(resp)
		return
	}
	q := s.quorum()
	t := kmsg.NewDescribeQuorumResponseTopic()
	t.Topic = metadataQuorumTopic
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.Partition, p.LeaderID, p.LeaderEpoch = metadataQuorumPartition, q.LeaderID, q.LeaderEpoch
	if !q.Leader {
		p.ErrorCode = kerr.NotLeaderForPartition.Code
		p.ErrorMessage = kmsg.StringPtr(kerr.NotLeaderForPartition.Description)
	} else {
		p.HighWatermark = q.HighWatermark
		for _, v := range q.Voters {
			rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
			rs.ReplicaID, rs.LogEndOffset = v.ID, v.LogEndOffset
			rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = unixMillis(v.LastFetch), unixMillis(v.LastCaughtUp)
			p.CurrentVoters = append(p.CurrentVoters, rs)
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = v.ID
			if v.Addr.Host != "" && v.Addr.Port > 0 && v.Addr.Port <= math.MaxUint16 {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = quorumListenerName, v.Addr.Host, uint16(v.Addr.Port)
				n.Listeners = append(n.Listeners, l)
			}
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	t.Partitions = append(t.Partitions, p)
	resp.Topics = append(resp.Topics, t)
	r.Respond(resp)
}

// namesMetadataPartition reports whether req asks for exactly the
// metadata partition, the only one Kafka's raft client describes.
func namesMetadataPartition(req *kmsg.DescribeQuorumRequest) bool {
	return len(req.Topics) == 1 && req.Topics[0].Topic == metadataQuorumTopic &&
		len(req.Topics[0].Partitions) == 1 && req.Topics[0].Partitions[0].Partition == metadataQuorumPartition
}

// quorum is the cluster view's quorum, or a single node's: itself as the
// leader and only voter, with no raft log.
func (s *Server) quorum() QuorumInfo {
	if qd, ok := s.cluster.(QuorumDescriber); ok {
		return qd.DescribeQuorum()
	}
	now := time.Now()
	q := QuorumInfo{LeaderID: s.cluster.Leader(), Leader: s.cluster.Serving()}
	for _, id := range s.cluster.Voters() {
		v := QuorumVoter{ID: id, LogEndOffset: -1, Addr: BrokerAddr{ID: id, Port: -1}}
		if b, ok := s.broker(id); ok {
			v.Addr = b
		}
		if id == q.LeaderID {
			v.LogEndOffset, v.LastFetch, v.LastCaughtUp = 0, now, now
		}
		q.Voters = append(q.Voters, v)
	}
	return q
}

// unixMillis is t in Kafka's timestamps, -1 for the zero time.
func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}
