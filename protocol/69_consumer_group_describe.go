package protocol

// ConsumerGroupDescribe: versions 0-1. Members with their epochs,
// subscriptions, current and target assignments (topic ids with names);
// a missing or classic group is GROUP_ID_NOT_FOUND. With no authorizer
// every group operation is allowed, which IncludeAuthorizedOperations
// reports.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(69, 0, 1, (*Server).consumerGroupDescribe) }

func (s *Server) consumerGroupDescribe(r *Request) {
	req := r.Msg.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	finish := fanIn(len(req.Groups), func() { r.Respond(resp) })
	for i, id := range req.Groups {
		s.groups.ConsumerGroupDescribe(id, func(g kmsg.ConsumerGroupDescribeResponseGroup) {
			g.AuthorizedOperations = -2147483648
			if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = groupOperations
			}
			resp.Groups[i] = g
			finish()
		})
	}
}
