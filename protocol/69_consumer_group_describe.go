package protocol

// ConsumerGroupDescribe: versions 0-1. Members with their epochs,
// subscriptions, current and target assignments (topic ids with names);
// a missing or classic group is GROUP_ID_NOT_FOUND. With no authorizer
// every group operation is allowed, which IncludeAuthorizedOperations
// reports.

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(69, 0, 1, (*Server).consumerGroupDescribe) }

func (s *Server) consumerGroupDescribe(r *Request) {
	req := r.Msg.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	if len(req.Groups) == 0 {
		r.Respond(resp)
		return
	}
	var mu sync.Mutex
	pending := len(req.Groups)
	for i, id := range req.Groups {
		s.groups.ConsumerGroupDescribe(id, func(g kmsg.ConsumerGroupDescribeResponseGroup) {
			g.AuthorizedOperations = -2147483648
			if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = groupOperations
			}
			mu.Lock()
			resp.Groups[i] = g
			pending--
			last := pending == 0
			mu.Unlock()
			if last {
				r.Respond(resp)
			}
		})
	}
}
