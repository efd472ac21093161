package protocol

// Coordinators spread over raft groups. A cluster with partition raft
// groups places each group id and transactional id on one of them by hash
// (as Kafka places them on __consumer_offsets and __transaction_state
// partitions): that group's leader coordinates the key, FindCoordinator
// names it, and the coordinator moves with the group's leadership. The
// handlers reach a key's coordinator through groupsFor and txnsFor; on a
// node that does not lead the key's group it is on standby and answers
// NOT_COORDINATOR. Without Coordinators every key is on the metadata
// group (shard 0), coordinated by its leader.

import (
	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/txn"
)

// Coordinators places the group and transaction coordinators.
type Coordinators interface {
	// Shard is the raft group whose leader coordinates key (a group id
	// or a transactional id); 0 is the metadata group.
	Shard(key string) uint8
	// Groups and Txns are shard's coordinators on this node; never nil
	// for a shard that Shard returns.
	Groups(shard uint8) *group.Manager
	Txns(shard uint8) *txn.Coordinator
	// Shards lists the shards this node runs, 0 first.
	Shards() []uint8
}

// SetCoordinators spreads the coordinators (nil: the metadata group's
// alone, NewServer's). Call before serving.
func (s *Server) SetCoordinators(c Coordinators) { s.coords = c }

// coordinatorShard is the raft group coordinating key.
func (s *Server) coordinatorShard(key string) uint8 {
	if s.coords == nil {
		return 0
	}
	return s.coords.Shard(key)
}

// coordinatorView is the raft group coordinating key: its leader is the
// key's coordinator.
func (s *Server) coordinatorView(key string) GroupView {
	return s.cluster.Group(s.coordinatorShard(key))
}

// groupsFor is the group coordinator of group id key on this node.
func (s *Server) groupsFor(key string) *group.Manager {
	if s.coords == nil {
		return s.groups
	}
	return s.coords.Groups(s.coords.Shard(key))
}

// txnsFor is the transaction coordinator of transactional id key on this
// node (nil: transactions not served).
func (s *Server) txnsFor(key string) *txn.Coordinator {
	if s.coords == nil {
		return s.txns
	}
	return s.coords.Txns(s.coords.Shard(key))
}

// allGroups is every group coordinator on this node (ListGroups lists
// the groups of those active).
func (s *Server) allGroups() []*group.Manager {
	if s.coords == nil {
		if s.groups == nil {
			return nil
		}
		return []*group.Manager{s.groups}
	}
	var out []*group.Manager
	for _, g := range s.coords.Shards() {
		out = append(out, s.coords.Groups(g))
	}
	return out
}

// allTxns is every transaction coordinator on this node.
func (s *Server) allTxns() []*txn.Coordinator {
	if s.coords == nil {
		if s.txns == nil {
			return nil
		}
		return []*txn.Coordinator{s.txns}
	}
	var out []*txn.Coordinator
	for _, g := range s.coords.Shards() {
		out = append(out, s.coords.Txns(g))
	}
	return out
}
