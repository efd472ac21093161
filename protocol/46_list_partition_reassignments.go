package protocol

// ListPartitionReassignments: version 0. Every partition stays on every
// raft voter (45_alter_partition_reassignments.go), so no reassignment is
// ever in progress: the answer lists none, for all topics (null) or the
// ones named, as Kafka answers when none is. ACLs: DESCRIBE on the
// cluster, else CLUSTER_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(46, 0, 0, (*Server).listPartitionReassignments) }

func (s *Server) listPartitionReassignments(r *Request) {
	req := r.Msg.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.authorizedCluster(r, acls.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	r.Respond(resp)
}
