package protocol

// DescribeGroups: versions 0-6. State names as Kafka ("Empty",
// "PreparingRebalance", "CompletingRebalance", "Stable", "Dead");
// members' metadata and assignments are shown while Stable. A missing
// group (or a KIP-848 consumer group or KIP-932 share group, which
// ConsumerGroupDescribe and ShareGroupDescribe describe) is
// GROUP_ID_NOT_FOUND on v6 ("is not a classic group") and, as Kafka 4.3
// answers older versions, "Dead" without an error before. With no authorizer every group
// operation is allowed, which IncludeAuthorizedOperations reports.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(15, 0, 6, (*Server).describeGroups) }

// groupOperations is READ, DELETE and DESCRIBE (Kafka's AclOperation
// codes 3, 6, 8), the operations on a group.
const groupOperations = 1<<3 | 1<<6 | 1<<8

// groupAuthorizedOps is a described group's AuthorizedOperations (Describe
// Groups, ConsumerGroupDescribe, ShareGroupDescribe): what r may do on the
// group when asked and the group was described, else INT32_MIN, Kafka's
// "not given".
func (s *Server) groupAuthorizedOps(r *Request, id string, asked bool, code int16) int32 {
	if asked && code == 0 {
		return s.authorizedOps(r, acls.Group, id, groupOperations)
	}
	return -2147483648
}

func (s *Server) describeGroups(r *Request) {
	req := r.Msg.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
	finish := fanIn(len(req.Groups), func() { r.Respond(resp) })
	for i, id := range req.Groups {
		if !s.authorized(r, acls.Describe, acls.Group, id) {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups[i] = g
			finish()
			continue
		}
		s.groupsFor(id).DescribeGroup(id, func(g kmsg.DescribeGroupsResponseGroup) {
			if req.Version < 6 && g.ErrorCode == kerr.GroupIDNotFound.Code {
				g.ErrorCode, g.ErrorMessage = 0, nil
			}
			g.AuthorizedOperations = s.groupAuthorizedOps(r, id, req.IncludeAuthorizedOperations, g.ErrorCode)
			resp.Groups[i] = g
			finish()
		})
	}
}
