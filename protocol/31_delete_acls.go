package protocol

// DeleteAcls: versions 0-3 (v1+ pattern types, v2+ flexible). Needs ALTER
// on the CLUSTER. Each filter is validated alone; the valid ones are
// committed together through the replicator and each reports what it
// removed (a binding several filters match is reported under each). On a
// cluster follower the request is forwarded to the leader (forward.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(31, 0, 3, (*Server).deleteACLs) }

func (s *Server) deleteACLs(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.DeleteACLsRequest)
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		}
		if code, msg := s.aclAPIAllowed(r, acls.Alter); code != 0 {
			for i := range resp.Results {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, &msg
			}
			return resp
		}
		var valid []acls.Filter
		var at []int
		for i, rf := range req.Filters {
			f := acls.Filter{
				ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
				Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType,
			}
			if req.Version == 0 {
				f.PatternType = acls.Literal
			}
			if err := f.Validate(); err != nil {
				msg := err.Error()
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, &msg
				continue
			}
			valid = append(valid, f)
			at = append(at, i)
		}
		if len(valid) == 0 {
			return resp
		}
		deleted, err := s.authz.Store().Delete(valid)
		for j, i := range at {
			if err != nil {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errorMessage(err)
				continue
			}
			for _, a := range deleted[j] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			}
		}
		return resp
	})
}
