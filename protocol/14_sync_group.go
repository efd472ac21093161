package protocol

// SyncGroup: versions 0-5 (instance id from v3, protocol type and name
// checked and returned from v5). Followers' answers wait for the leader's
// assignment in the group's actor.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(14, 0, 5, (*Server).syncGroup) }

func (s *Server) syncGroup(r *Request) {
	req := r.Msg.(*kmsg.SyncGroupRequest)
	if !s.authorized(r, acls.Read, acls.Group, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	s.groupsFor(req.Group).SyncGroup(req, func(resp *kmsg.SyncGroupResponse) { r.Respond(resp) })
}
