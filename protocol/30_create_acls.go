package protocol

// CreateAcls: versions 0-3 (v1+ pattern types, v2+ flexible). Needs ALTER
// on the CLUSTER; each creation is validated alone (INVALID_REQUEST with
// the reason), the valid ones are committed together through the
// replicator. On a cluster follower the request is forwarded to the leader
// and answered as the leader answered (forward.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(30, 0, 3, (*Server).createACLs) }

func (s *Server) createACLs(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.CreateACLsRequest)
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		}
		if code, msg := s.aclAPIAllowed(r, acls.Alter); code != 0 {
			for i := range resp.Results {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, &msg
			}
			return resp
		}
		var valid []acls.ACL
		var at []int // index in Results of each valid binding
		for i, c := range req.Creations {
			a := acls.ACL{
				ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
				Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType,
			}
			if req.Version == 0 {
				a.PatternType = acls.Literal
			}
			if err := a.Validate(); err != nil {
				msg := err.Error()
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, &msg
				continue
			}
			valid = append(valid, a)
			at = append(at, i)
		}
		if len(valid) == 0 {
			return resp
		}
		if err := s.authz.Store().Create(valid); err != nil {
			for _, i := range at {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errorMessage(err)
			}
		}
		return resp
	})
}
