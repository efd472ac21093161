package protocol

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/topics"
)

// ClusterView is what handlers know of the cluster: which nodes exist at
// which Kafka address, who leads, and whether this node serves. Its own
// Leader, LeaderEpoch, Serving and InSync are the metadata raft group's
// (group 0): it leads the group and transaction coordinators, the
// controller's work, and every partition not placed on a partition group.
// A partition's leadership is its group's (Group, Server.partitionGroup).
type ClusterView interface {
	// Brokers lists the voters with their Kafka addresses, by id.
	Brokers() []BrokerAddr
	// Leader is the metadata group's leading node's id, -1 while none
	// is known.
	Leader() int32
	// LeaderEpoch is the metadata group's raft term, which rises at
	// every leadership change (0 on a single node): the leader epoch of
	// the partitions it orders.
	LeaderEpoch() int32
	// Serving reports whether this node is the metadata group's
	// caught-up leader.
	Serving() bool
	// Voters lists every voter; InSync those the leader hears from.
	Voters() []int32
	InSync() []int32
	// ClusterID is the id every node reports.
	ClusterID() string
	// Group is raft group g's view; Group(0) answers what the view's
	// own Leader, LeaderEpoch, Serving and InSync answer.
	Group(g uint8) GroupView
}

// GroupView is what handlers know of one raft group: the partitions it
// orders are led by its leader.
type GroupView interface {
	Leader() int32      // -1 while none is known
	LeaderEpoch() int32 // the group's term (0 on a single node)
	Serving() bool      // this node is the group's caught-up leader
	InSync() []int32
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

// Group: a single node leads every group it could have.
func (s singleNode) Group(uint8) GroupView { return s }

// partitionGroup is the view of the raft group that orders partition p of
// t: its leader leads the partition, its term is the partition's leader
// epoch, its in-sync voters are the partition's ISR. A nil t (a topic that
// does not exist, or an internal one, whose partitions are coordinators')
// is the metadata group's.
func (s *Server) partitionGroup(t *topics.Topic, p int32) GroupView {
	return s.cluster.Group(groupOf(t, p))
}

// topicGroup is partitionGroup for the topic named topic, for handlers
// that have the name.
func (s *Server) topicGroup(topic string, p int32) GroupView {
	return s.partitionGroup(s.topics.Get(topic), p)
}

// groupOf is the raft group of partition p of t (nil t: 0, the metadata
// group).
func groupOf(t *topics.Topic, p int32) uint8 {
	if t == nil {
		return 0
	}
	return t.PartitionGroup(p)
}

// groupStates reads each raft group's leader, epoch and ISR once per
// answer, when a partition of the group is first described: InSync asks
// raft, and a topic can have thousands of partitions. Owned by the
// answer's goroutine.
type groupStates struct {
	s *Server
	m map[uint8]groupState
}

// groupState is one group's leader (-1: none known), leader epoch and
// in-sync voters; known: the leader is a broker with an address.
type groupState struct {
	leader, epoch int32
	isr           []int32
	known         bool
}

func (s *Server) newGroupStates() *groupStates {
	return &groupStates{s: s, m: map[uint8]groupState{}}
}

// of is the state of the group that orders partition p of t.
func (gs *groupStates) of(t *topics.Topic, p int32) groupState {
	g := groupOf(t, p)
	st, ok := gs.m[g]
	if !ok {
		v := gs.s.cluster.Group(g)
		st = groupState{leader: v.Leader(), epoch: v.LeaderEpoch(), isr: v.InSync()}
		_, st.known = gs.s.broker(st.leader)
		gs.m[g] = st
	}
	return st
}

// leaderEpochError checks the current leader epoch a client sent (Fetch,
// ListOffsets, OffsetForLeaderEpoch) against the partition's, its group's
// term, as Kafka's partition does: -1 is not checked; an older epoch is
// fenced (the client follows a leader that no longer leads); a newer one
// is unknown (this node has not learned of it yet). Either way the client
// refreshes its metadata and retries.
func leaderEpochError(g GroupView, requested int32) int16 {
	if requested < 0 {
		return 0
	}
	switch cur := g.LeaderEpoch(); {
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
