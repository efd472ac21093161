package protocol

// JoinGroup: versions 0-9. Kafka's classic protocol: the delayed first
// rebalance (group.initial.rebalance.delay.ms), MEMBER_ID_REQUIRED from v4,
// static membership from v5, SkipAssignment for a returning static leader
// from v9. The answer waits for the join phase, in the group's actor; the
// event loop is not held.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/group"
)

func init() { register(11, 0, 9, (*Server).joinGroup) }

func (s *Server) joinGroup(r *Request) {
	req := r.Msg.(*kmsg.JoinGroupRequest)
	if !s.authorized(r, acls.Read, acls.Group, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	s.groupsFor(req.Group).JoinGroup(req, groupClient(r), func(resp *kmsg.JoinGroupResponse) { r.Respond(resp) })
}

// groupClient is what a group records of a member's connection: its client
// id and, as Kafka shows it, "/" and the peer's IP.
func groupClient(r *Request) group.Client {
	c := group.Client{ID: r.ClientID}
	if r.Conn != nil {
		host := r.Conn.RemoteAddr
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		c.Host = "/" + host
	}
	return c
}
