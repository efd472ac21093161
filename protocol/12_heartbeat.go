package protocol

// Heartbeat: versions 0-4 (instance id from v3). As Kafka: a missing group
// or member is UNKNOWN_MEMBER_ID, a stale generation ILLEGAL_GENERATION, a
// rebalance REBALANCE_IN_PROGRESS.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(12, 0, 4, (*Server).heartbeat) }

func (s *Server) heartbeat(r *Request) {
	req := r.Msg.(*kmsg.HeartbeatRequest)
	if !s.authorized(r, acls.Read, acls.Group, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	s.groupsFor(req.Group).Heartbeat(req, func(resp *kmsg.HeartbeatResponse) { r.Respond(resp) })
}
