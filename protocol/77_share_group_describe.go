package protocol

// ShareGroupDescribe: version 1, as Kafka 4.3 serves it (v0 was Kafka
// 4.0's early-access form). State (Empty, Stable), group and assignment
// epochs, the "simple" assignor, members with their epochs, subscriptions
// and assignments (topic ids with names). A missing group is
// GROUP_ID_NOT_FOUND "Group X not found.", a classic or consumer group
// "Group X is not a share group."; an empty group id INVALID_GROUP_ID.
// Refused with UNSUPPORTED_VERSION while share groups are off. With no
// authorizer every group operation is allowed, which
// IncludeAuthorizedOperations reports.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(77, 1, 1, (*Server).shareGroupDescribe) }

func (s *Server) shareGroupDescribe(r *Request) {
	req := r.Msg.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	resp.Groups = make([]kmsg.ShareGroupDescribeResponseGroup, len(req.GroupIDs))
	refuse := func(i int, id string, code int16) {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID, g.ErrorCode = id, code
		g.AuthorizedOperations = -2147483648
		resp.Groups[i] = g
	}
	if !s.shareOn() {
		for i, id := range req.GroupIDs {
			refuse(i, id, kerr.UnsupportedVersion.Code)
		}
		r.Respond(resp)
		return
	}
	finish := fanIn(len(req.GroupIDs), func() { r.Respond(resp) })
	for i, id := range req.GroupIDs {
		switch {
		case id == "":
			refuse(i, id, kerr.InvalidGroupID.Code)
			finish()
			continue
		case !s.authorized(r, acls.Describe, acls.Group, id):
			refuse(i, id, kerr.GroupAuthorizationFailed.Code)
			finish()
			continue
		}
		s.groupsFor(id).ShareGroupDescribe(id, func(g kmsg.ShareGroupDescribeResponseGroup) {
			g.AuthorizedOperations = s.groupAuthorizedOps(r, id, req.IncludeAuthorizedOperations, g.ErrorCode)
			resp.Groups[i] = g
			finish()
		})
	}
}
