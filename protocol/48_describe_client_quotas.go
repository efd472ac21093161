package protocol

// DescribeClientQuotas: versions 0-1. Regent enforces no client quotas,
// so every filter matches none and the answer is empty. Served so that
// Kafka's kafka-configs --describe --entity-type users (which asks for a
// user's quotas beside its SCRAM credentials) works. ACLs: DESCRIBE_CONFIGS
// on the cluster, else CLUSTER_AUTHORIZATION_FAILED, as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(48, 0, 1, (*Server).describeClientQuotas) }

func (s *Server) describeClientQuotas(r *Request) {
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !s.authorizedCluster(r, acls.DescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	} else {
		// Non-nil: the entries are nullable, and Kafka's client reads a
		// null as an error.
		resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	}
	r.Respond(resp)
}
