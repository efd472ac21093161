package protocol

// ElectLeaders: versions 0-2 (kafka-leader-election.sh). A partition's
// leader is its raft group's (the metadata group's, 0, unless partition
// groups are on), so an election moves every partition of the group at
// once. PREFERRED: a partition whose preferred leader (the first of its
// replicas, as Metadata lists them) leads its group already is
// ELECTION_NOT_NEEDED; the others are elected by handing their group's
// leadership to their preferred leader, when the group's partitions asked
// all prefer the same node and it is in sync, and answered once it leads.
// Partitions of one group that prefer different nodes cannot all have
// their way: they are refused PREFERRED_LEADER_NOT_AVAILABLE, saying so
// (name fewer partitions to move the leader to one of them); each group
// is decided on its own. UNCLEAN: raft never
// elects a node that lacks committed entries, so an election is never
// needed while a leader exists. For all partitions (null topics), those
// that need no election are left out of the answer, as Kafka does. ACLs:
// ALTER on the cluster. A follower forwards the request to the leader.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(43, 0, 2, (*Server).electLeaders) }

// LeaderMover is a ClusterView that can hand a raft group's leadership to
// another voter (raftView); a single node cannot.
type LeaderMover interface {
	// MoveLeadership makes voter id the leader of group g and returns
	// once this node sees it lead, or ctx ends.
	MoveLeadership(ctx context.Context, g uint8, id int32) error
}

const (
	electPreferred = 0
	electUnclean   = 1
)

// electTarget is the answer slot of a partition to elect:
// resp.Topics[topic].Partitions[partition].
type electTarget struct{ topic, partition int }

// electAsked is one topic's partitions to elect.
type electAsked struct {
	topic      string
	partitions []int32
}

func (s *Server) electLeaders(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.ElectLeadersRequest)
		resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		all := req.Topics == nil
		var asked []struct {
			topic      string
			partitions []int32
		}
		if all {
			for _, t := range s.topics.List() {
				ps := make([]int32, len(t.Partitions))
				for i := range ps {
					ps[i] = int32(i)
				}
				asked = append(asked, struct {
					topic      string
					partitions []int32
				}{t.Name, ps})
			}
		} else {
			for _, rt := range req.Topics {
				asked = append(asked, struct {
					topic      string
					partitions []int32
				}{rt.Topic, rt.Partitions})
			}
		}
		denied := !s.authorizedCluster(r, acls.Alter)
		if denied && req.Version >= 1 {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		voters, groups := s.cluster.Voters(), s.newGroupStates()
		moves := map[uint8]map[int32][]electTarget{} // group -> preferred leader -> partitions that want it
		for _, a := range asked {
			ot := kmsg.NewElectLeadersResponseTopic()
			ot.Topic = a.topic
			ot.Partitions = make([]kmsg.ElectLeadersResponseTopicPartition, 0, len(a.partitions))
			t := s.topics.Get(a.topic)
			for _, p := range a.partitions {
				op := kmsg.NewElectLeadersResponseTopicPartition()
				op.Partition = p
				switch {
				case denied:
					op.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case t == nil || s.topics.Partition(a.topic, p) == nil:
					op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case req.Version >= 1 && req.ElectionType != electPreferred && req.ElectionType != electUnclean:
					op.ErrorCode = kerr.InvalidRequest.Code
					op.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("election type %d: Regent knows PREFERRED (0) and UNCLEAN (1)", req.ElectionType))
				case groups.of(t, p).leader < 0:
					op.ErrorCode = kerr.EligibleLeadersNotAvailable.Code
					op.ErrorMessage = kmsg.StringPtr("the cluster is electing a leader")
				case req.Version >= 1 && req.ElectionType == electUnclean:
					op.ErrorCode = kerr.ElectionNotNeeded.Code
				default:
					g := groups.of(t, p)
					preferred := t.ReplicaOrder(p, voters)[0]
					if preferred == g.leader {
						op.ErrorCode = kerr.ElectionNotNeeded.Code
						break
					}
					if !slices.Contains(g.isr, preferred) {
						op.ErrorCode = kerr.PreferredLeaderNotAvailable.Code
						op.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("preferred leader %d is not in sync", preferred))
						break
					}
					gid := groupOf(t, p)
					if moves[gid] == nil {
						moves[gid] = map[int32][]electTarget{}
					}
					moves[gid][preferred] = append(moves[gid][preferred], electTarget{len(resp.Topics), len(ot.Partitions)})
					ot.Partitions = append(ot.Partitions, op)
					continue
				}
				if all && op.ErrorCode == kerr.ElectionNotNeeded.Code {
					continue
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			if len(ot.Partitions) > 0 || !all {
				resp.Topics = append(resp.Topics, ot)
			}
		}
		s.electMoves(r, req, resp, moves)
		return resp
	})
}

// electMoves carries out the preferred elections asked, group by group:
// one leader for all of a group's partitions asked, or none.
func (s *Server) electMoves(r *Request, req *kmsg.ElectLeadersRequest, resp *kmsg.ElectLeadersResponse, moves map[uint8]map[int32][]electTarget) {
	if len(moves) == 0 {
		return
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > time.Minute {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	for _, g := range slices.Sorted(maps.Keys(moves)) {
		s.electGroupMove(ctx, resp, g, moves[g])
	}
}

// electGroupMove hands group g's leadership to the one node its partitions
// asked prefer, or refuses them all.
func (s *Server) electGroupMove(ctx context.Context, resp *kmsg.ElectLeadersResponse, g uint8, moves map[int32][]electTarget) {
	refuse := func(code int16, msg string) {
		for _, ts := range moves {
			for _, t := range ts {
				op := &resp.Topics[t.topic].Partitions[t.partition]
				op.ErrorCode, op.ErrorMessage = code, kmsg.StringPtr(msg)
			}
		}
	}
	if len(moves) > 1 {
		nodes := slices.Sorted(maps.Keys(moves))
		refuse(kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("one raft group leads these partitions, and they prefer different leaders (nodes %v): no single election serves them; name the partitions of one preferred leader", nodes))
		return
	}
	mover, ok := s.cluster.(LeaderMover)
	var to int32
	for id := range moves {
		to = id
	}
	if !ok {
		refuse(kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("node %d cannot be made leader here", to))
		return
	}
	if err := mover.MoveLeadership(ctx, g, to); err != nil {
		s.log.Warn("preferred leader election failed", "group", g, "to", to, "err", err)
		refuse(kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("moving the leadership to node %d: %v", to, err))
		return
	}
	s.log.Info("preferred leader elected", "group", g, "leader", to)
}
