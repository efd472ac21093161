package protocol

// StreamsGroupDescribe: version 0 (KIP-1071). The group's epochs,
// topology and members with their processes, endpoints, current and
// target tasks; a missing group, or one of another type, is
// GROUP_ID_NOT_FOUND. Task offsets are not kept (Kafka 4.3 does not take
// them either), so members report none.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(89, 0, 0, (*Server).streamsGroupDescribe) }

func (s *Server) streamsGroupDescribe(r *Request) {
	req := r.Msg.(*kmsg.StreamsGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	resp.Groups = make([]kmsg.StreamsGroupDescribeResponseGroup, len(req.Groups))
	if !s.streamsOn() {
		for i, id := range req.Groups {
			g := kmsg.NewStreamsGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, kerr.UnsupportedVersion.Code
			resp.Groups[i] = g
		}
		r.Respond(resp)
		return
	}
	finish := fanIn(len(req.Groups), func() { r.Respond(resp) })
	for i, id := range req.Groups {
		if !s.authorized(r, acls.Describe, acls.Group, id) {
			g := kmsg.NewStreamsGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups[i] = g
			finish()
			continue
		}
		s.groupsFor(id).StreamsGroupDescribe(id, func(g kmsg.StreamsGroupDescribeResponseGroup) {
			g.AuthorizedOperations = s.groupAuthorizedOps(r, id, req.IncludeAuthorizedOperations, g.ErrorCode)
			resp.Groups[i] = g
			finish()
		})
	}
}
