package protocol

// SyncGroup: versions 0-5 (instance id from v3, protocol type and name
// checked and returned from v5). Followers' answers wait for the leader's
// assignment in the group's actor.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(14, 0, 5, (*Server).syncGroup) }

func (s *Server) syncGroup(r *Request) {
	req := r.Msg.(*kmsg.SyncGroupRequest)
	s.groups.SyncGroup(req, func(resp *kmsg.SyncGroupResponse) { r.Respond(resp) })
}
