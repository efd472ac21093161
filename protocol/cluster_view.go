package protocol

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ClusterView is what handlers know of the cluster: which nodes exist at
// which Kafka address, who leads, and whether this node serves. In
// cluster mode one raft group leads everything: the raft leader is the
// leader of every partition and the group and transaction coordinator.
type ClusterView interface {
	// Brokers lists the voters with their Kafka addresses, by id.
	Brokers() []BrokerAddr
	// Leader is the leading node's id, -1 while none is known.
	Leader() int32
	// LeaderEpoch is every partition's current leader epoch: the raft
	// term, which rises at every leadership change (0 on a single node).
	LeaderEpoch() int32
	// Serving reports whether this node is the caught-up leader.
	Serving() bool
	// Voters lists every voter; InSync those the leader hears from.
	Voters() []int32
	InSync() []int32
	// ClusterID is the id every node reports.
	ClusterID() string
}

// BrokerAddr is one node's advertised Kafka address, and its rack ("":
// none or not known).
type BrokerAddr struct {
	ID   int32
	Host string
	Port int32
	Rack string
}

// ParseBrokerAddr splits host:port ("" host and port -1 when malformed).
func ParseBrokerAddr(id int32, hostport string) BrokerAddr {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return BrokerAddr{ID: id, Port: -1}
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return BrokerAddr{ID: id, Host: host, Port: -1}
	}
	return BrokerAddr{ID: id, Host: host, Port: int32(p)}
}

// singleNode is the view of a one-node broker: it is everything.
type singleNode struct {
	self BrokerAddr
	id   string
}

func (s singleNode) ClusterID() string     { return s.id }
func (s singleNode) Brokers() []BrokerAddr { return []BrokerAddr{s.self} }
func (s singleNode) Leader() int32         { return s.self.ID }
func (s singleNode) LeaderEpoch() int32    { return 0 }
func (s singleNode) Serving() bool         { return true }
func (s singleNode) Voters() []int32       { return []int32{s.self.ID} }
func (s singleNode) InSync() []int32       { return []int32{s.self.ID} }

// leaderEpochError checks the current leader epoch a client sent (Fetch,
// ListOffsets, OffsetForLeaderEpoch) against the partition's, as Kafka's
// partition does: -1 is not checked; an older epoch is fenced (the client
// follows a leader that no longer leads); a newer one is unknown (this
// node has not learned of it yet). Either way the client refreshes its
// metadata and retries.
func (s *Server) leaderEpochError(requested int32) int16 {
	if requested < 0 {
		return 0
	}
	switch cur := s.cluster.LeaderEpoch(); {
	case requested > cur:
		return kerr.UnknownLeaderEpoch.Code
	case requested < cur:
		return kerr.FencedLeaderEpoch.Code
	}
	return 0
}

// broker returns the address of node id, if it is a known voter.
func (s *Server) broker(id int32) (BrokerAddr, bool) {
	for _, b := range s.cluster.Brokers() {
		if b.ID == id {
			return b, true
		}
	}
	return BrokerAddr{}, false
}

// isVoter reports whether id is a voter.
func (s *Server) isVoter(id int32) bool {
	for _, v := range s.cluster.Voters() {
		if v == id {
			return true
		}
	}
	return false
}

// controllerID is the controller Metadata and DescribeCluster name. Kafka's
// brokers name a random live broker (clients cannot reach the controller
// quorum) and forward the admin requests sent there; a node that forwards
// names itself, so admin requests are answered where the client already
// is. Without forwarding (a single node, or no admin endpoint): the leader.
func (s *Server) controllerID() int32 {
	if s.forwarder != nil {
		if _, ok := s.broker(s.cfg.NodeID); ok {
			return s.cfg.NodeID
		}
	}
	return s.cluster.Leader()
}
