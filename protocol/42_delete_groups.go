package protocol

// DeleteGroups: versions 0-3 (v3 adds error messages). Only an empty group
// is deleted (NON_EMPTY_GROUP otherwise), with its committed offsets; a
// missing one is GROUP_ID_NOT_FOUND. An empty share group goes with its
// share-partitions' state (the group manager's deleted-listener).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(42, 0, 3, (*Server).deleteGroups) }

func (s *Server) deleteGroups(r *Request) {
	req := r.Msg.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	finish := fanIn(len(req.Groups), func() { r.Respond(resp) })
	for i, id := range req.Groups {
		if !s.authorized(r, acls.Delete, acls.Group, id) {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups[i] = g
			finish()
			continue
		}
		s.groupsFor(id).DeleteGroup(id, func(g kmsg.DeleteGroupsResponseGroup) {
			if g.ErrorCode != 0 && g.ErrorMessage == nil {
				if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
					msg := err.(*kerr.Error).Description
					g.ErrorMessage = &msg
				}
			}
			resp.Groups[i] = g
			finish()
		})
	}
}
