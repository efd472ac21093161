package protocol

// AlterPartitionReassignments: versions 0-1. Every raft voter holds every
// partition (SPEC §6), so a partition's replicas are the voters, always,
// and nothing can be moved: a target that is the voters in another order
// is stored and done at once (it orders the replicas Metadata and
// DescribeTopicPartitions report, the first being the preferred leader a
// client expects), as Kafka completes a reassignment that only reorders;
// any other target is INVALID_REPLICA_ASSIGNMENT, saying why, and so are
// Kafka's malformed targets (empty, a replica twice, a broker that is not
// a voter). Cancelling (null replicas) is NO_REASSIGNMENT_IN_PROGRESS:
// there never is one. Unknown topics and partitions are
// UNKNOWN_TOPIC_OR_PARTITION. ACLs: ALTER on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED for the request and every partition.
// A cluster follower forwards the request to the leader (forward.go).

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(45, 0, 1, (*Server).alterPartitionReassignments) }

func (s *Server) alterPartitionReassignments(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
		denied := !s.authorizedCluster(r, acls.Alter)
		if denied {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		voters := slices.Sorted(slices.Values(s.cluster.Voters()))
		for _, rt := range req.Topics {
			ot := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			ot.Topic = rt.Topic
			// The reorders of this topic, stored in one command.
			orders := map[int32][]int32{}
			t := s.topics.Get(rt.Topic)
			for _, rp := range rt.Partitions {
				op := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				op.Partition = rp.Partition
				var err error
				switch {
				case denied:
					err = kerr.ClusterAuthorizationFailed
				case s.topics.Partition(rt.Topic, rp.Partition) == nil:
					err = kerr.UnknownTopicOrPartition
				default:
					err = reassignmentRefusal(rp.Replicas, voters)
				}
				if err == nil && !slices.Equal(t.ReplicaOrder(rp.Partition, voters), rp.Replicas) {
					orders[rp.Partition] = rp.Replicas
				}
				if err != nil {
					op.ErrorCode, op.ErrorMessage = errorCode(err), errorMessage(err)
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			if err := s.topics.Reassign(rt.Topic, orders); err != nil {
				for i, op := range ot.Partitions {
					if _, ok := orders[op.Partition]; ok {
						ot.Partitions[i].ErrorCode, ot.Partitions[i].ErrorMessage = errorCode(err), errorMessage(err)
					}
				}
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	})
}

// reassignmentRefusal is why moving a partition to target cannot be done
// (nil: target is the voters, the replicas it has). voters is sorted.
func reassignmentRefusal(target, voters []int32) error {
	if target == nil {
		return fmt.Errorf("%w: no reassignment is in progress: every partition stays on every raft voter", kerr.NoReassignmentInProgress)
	}
	if len(target) == 0 {
		return fmt.Errorf("%w: the replica list is empty", kerr.InvalidReplicaAssignment)
	}
	sorted := slices.Sorted(slices.Values(target))
	for i, b := range sorted {
		if i > 0 && sorted[i-1] == b {
			return fmt.Errorf("%w: broker %d is named twice", kerr.InvalidReplicaAssignment, b)
		}
		if !slices.Contains(voters, b) {
			return fmt.Errorf("%w: broker %d is not a raft voter (voters: %v)", kerr.InvalidReplicaAssignment, b, voters)
		}
	}
	if !slices.Equal(sorted, voters) {
		return fmt.Errorf("%w: every partition is replicated to every raft voter %v, so its replicas cannot be chosen", kerr.InvalidReplicaAssignment, voters)
	}
	return nil
}
