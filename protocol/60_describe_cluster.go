package protocol

// DescribeCluster: versions 0-2. Endpoint type 1 (brokers) is served; 2
// (controllers) is refused: Regent has no separate controller listener.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(60, 0, 2, (*Server).describeCluster) }

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
	resp.ControllerID = s.cluster.Leader()
	resp.ClusterAuthorizedOperations = -2147483648
	for _, cb := range s.cluster.Brokers() {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = cb.ID, cb.Host, cb.Port
		resp.Brokers = append(resp.Brokers, b)
	}
	r.Respond(resp)
}
