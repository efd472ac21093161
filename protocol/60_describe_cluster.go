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
	resp.ClusterID = s.cfg.ClusterID
	resp.ControllerID = s.cfg.NodeID
	resp.ClusterAuthorizedOperations = -2147483648
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, s.cfg.Host, s.cfg.Port
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
	r.Respond(resp)
}
