package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reads from followers (KIP-392). Every voter holds every partition, and a
// follower holds only committed entries (it applies what raft committed),
// so whatever a follower has applied is safe to serve: its high watermark
// is its applied log end, and read_committed reads its own last stable
// offset, which every node computes alike. With racks set (--rack on the
// nodes), the leader answers a consumer's fetch that names another rack
// (client.rack, Fetch v11+) with the in-sync follower of that rack as its
// preferred read replica, and no records; the follower then serves that
// consumer. A follower asked for an offset past what it has applied waits
// for it up to the fetch's max wait (it is moments behind the leader)
// before answering OFFSET_OUT_OF_RANGE, on which clients go back to the
// leader.

// fetchRole is how this node serves one fetch request.
type fetchRole struct {
	// follower: this node does not lead and serves a consumer from what
	// it has applied.
	follower bool
	// preferred is the replica the leader points the consumer at (-1:
	// this node serves it).
	preferred int32
}

// fetchReplicaID is the requesting replica's id (-1 or less: a consumer).
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// fetchRoles sets each item's raft group and how this node serves it: a
// node can lead one partition's group and follow another's. The role is
// decided once per request and group.
func (s *Server) fetchRoles(req *kmsg.FetchRequest, items []fetchItem) {
	roles := map[uint8]fetchRole{}
	for i := range items {
		it := &items[i]
		g := groupOf(s.topics.Get(it.key.topic), it.key.partition)
		it.group = s.cluster.Group(g)
		role, ok := roles[g]
		if !ok {
			role = s.fetchRoleOf(req, it.group)
			roles[g] = role
		}
		it.role = role
	}
}

// fetchRoleOf decides how this node serves req's partitions of raft group
// g. Reads from followers are on when this node has a rack; only consumers
// using Fetch v11+ (which know to follow a preferred read replica) take
// part.
func (s *Server) fetchRoleOf(req *kmsg.FetchRequest, g GroupView) fetchRole {
	role := fetchRole{preferred: -1}
	if s.cfg.Rack == "" || req.Version < 11 || fetchReplicaID(req) >= 0 {
		return role
	}
	if !g.Serving() {
		role.follower = s.isVoter(s.cfg.NodeID)
		return role
	}
	if req.Rack == "" || req.Rack == s.cfg.Rack {
		return role
	}
	racks := map[int32]string{}
	for _, b := range s.cluster.Brokers() {
		racks[b.ID] = b.Rack
	}
	for _, id := range g.InSync() {
		if id != s.cfg.NodeID && racks[id] == req.Rack {
			role.preferred = id
			break
		}
	}
	return role
}

// outOfRangeOnFollower turns the answer of a partition this node follows
// and still had not reached the fetch offset of, once the fetch stops
// waiting, into OFFSET_OUT_OF_RANGE.
func outOfRangeOnFollower(items []fetchItem, results []kmsg.FetchResponseTopicPartition) {
	for i, it := range items {
		rp := &results[i]
		if it.role.follower && rp.ErrorCode == 0 && rp.HighWatermark >= 0 && it.offset > rp.HighWatermark {
			rp.ErrorCode = kerr.OffsetOutOfRange.Code
		}
	}
}

// rackPtr is a rack as Metadata and DescribeCluster carry it (null: none).
func rackPtr(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}
