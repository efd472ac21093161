package protocol

// DeleteGroups: versions 0-3 (v3 adds error messages). Only an empty group
// is deleted (NON_EMPTY_GROUP otherwise), with its committed offsets; a
// missing one is GROUP_ID_NOT_FOUND.

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(42, 0, 3, (*Server).deleteGroups) }

func (s *Server) deleteGroups(r *Request) {
	req := r.Msg.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	if len(req.Groups) == 0 {
		r.Respond(resp)
		return
	}
	var mu sync.Mutex
	pending := len(req.Groups)
	for i, id := range req.Groups {
		s.groups.DeleteGroup(id, func(g kmsg.DeleteGroupsResponseGroup) {
			if g.ErrorCode != 0 && g.ErrorMessage == nil {
				if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
					msg := err.(*kerr.Error).Description
					g.ErrorMessage = &msg
				}
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
