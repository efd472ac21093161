package protocol

// DescribeCluster: versions 0-2. Endpoint type 1 (brokers) is served; 2
// (controllers) is refused: Regent has no separate controller listener.
// As Kafka, any principal may describe the cluster; DESCRIBE on the
// cluster only decides what ClusterAuthorizedOperations reports.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(60, 0, 2, (*Server).describeCluster) }

// clusterOperations are the operations on the cluster (Kafka's AclOperation
// codes): CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS
// 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
const clusterOperations = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12

func (s *Server) describeCluster(r *Request) {
	req := r.Msg.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType == 2 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "Regent serves no controller endpoints; voters are brokers"
		resp.ErrorMessage = &msg
		r.Respond(resp)
		return
	}
	resp.ClusterID = s.cluster.ClusterID()
	resp.ControllerID = s.controllerID()
	resp.ClusterAuthorizedOperations = -2147483648
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = s.authorizedOps(r, acls.Cluster, acls.ClusterName, clusterOperations)
	}
	for _, cb := range s.cluster.Brokers() {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = cb.ID, cb.Host, cb.Port, rackPtr(cb.Rack)
		resp.Brokers = append(resp.Brokers, b)
	}
	r.Respond(resp)
}
