package protocol

// ConsumerGroupDescribe: versions 0-1. Members with their epochs,
// subscriptions, current and target assignments (topic ids with names);
// a missing or classic group is GROUP_ID_NOT_FOUND. With no authorizer
// every group operation is allowed, which IncludeAuthorizedOperations
// reports.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(69, 0, 1, (*Server).consumerGroupDescribe) }

func (s *Server) consumerGroupDescribe(r *Request) {
	req := r.Msg.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	finish := fanIn(len(req.Groups), func() { r.Respond(resp) })
	for i, id := range req.Groups {
		if !s.authorized(r, acls.Describe, acls.Group, id) {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups[i] = g
			finish()
			continue
		}
		s.groupsFor(id).ConsumerGroupDescribe(id, func(g kmsg.ConsumerGroupDescribeResponseGroup) {
			g.AuthorizedOperations = s.groupAuthorizedOps(r, id, req.IncludeAuthorizedOperations, g.ErrorCode)
			resp.Groups[i] = g
			finish()
		})
	}
}
