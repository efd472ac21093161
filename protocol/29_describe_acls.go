package protocol

// DescribeAcls: versions 0-3 (v1+ pattern types, v2+ flexible). Needs
// DESCRIBE on the CLUSTER. Without an authorizer, SECURITY_DISABLED as
// Kafka answers. v0 filters and lists LITERAL bindings only, as v0 cannot
// name a pattern type.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(29, 0, 3, (*Server).describeACLs) }

func (s *Server) describeACLs(r *Request) {
	req := r.Msg.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if code, msg := s.aclAPIAllowed(r, acls.Describe); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		r.Respond(resp)
		return
	}
	f := acls.Filter{
		ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType,
	}
	if req.Version == 0 {
		f.PatternType = acls.Literal
	}
	if err := f.Validate(); err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
		r.Respond(resp)
		return
	}
	// Bindings come sorted by resource type, pattern type and name, so
	// those of one resource are adjacent.
	for _, a := range s.authz.Store().Set().Select(f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != a.ResourceType || resp.Resources[n-1].ResourcePatternType != a.PatternType || resp.Resources[n-1].ResourceName != a.ResourceName {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
			resp.Resources = append(resp.Resources, res)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, e)
	}
	r.Respond(resp)
}

// aclAPIAllowed checks an ACL API: SECURITY_DISABLED without an
// authorizer, CLUSTER_AUTHORIZATION_FAILED without op on the cluster.
func (s *Server) aclAPIAllowed(r *Request, op kmsg.ACLOperation) (int16, string) {
	if s.authz == nil {
		return kerr.SecurityDisabled.Code, "no authorizer is configured on the broker (start it with --authorizer acl)"
	}
	if !s.authorizedCluster(r, op) {
		return kerr.ClusterAuthorizationFailed.Code, "not authorized to " + op.String() + " the cluster's ACLs"
	}
	return 0, ""
}
