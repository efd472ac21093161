package protocol

// LeaveGroup: versions 0-5. v0-v2 name one member and answer with a
// top-level error; v3+ batch members (by member id, or by instance id
// alone for an admin removal) and answer per member.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(13, 0, 5, (*Server).leaveGroup) }

func (s *Server) leaveGroup(r *Request) {
	req := r.Msg.(*kmsg.LeaveGroupRequest)
	if !s.authorized(r, acls.Read, acls.Group, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	if req.Version < 3 {
		req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	s.groupsFor(req.Group).LeaveGroup(req, func(resp *kmsg.LeaveGroupResponse) {
		if req.Version < 3 && resp.ErrorCode == 0 && len(resp.Members) == 1 {
			resp.ErrorCode = resp.Members[0].ErrorCode
		}
		r.Respond(resp)
	})
}
