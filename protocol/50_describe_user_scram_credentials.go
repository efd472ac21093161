package protocol

// DescribeUserScramCredentials: version 0. No users (null or empty) lists
// every user with a credential; a named user without one is answered
// RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE, as Kafka's.
// Only mechanisms and iteration counts are told, never salts or keys.
// Without a credential store every user is unknown. ACLs: DESCRIBE on the
// cluster, else CLUSTER_AUTHORIZATION_FAILED, as Kafka.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/users"
)

func init() { register(50, 0, 0, (*Server).describeUserScramCredentials) }

// SetUsers installs the SCRAM credential store (nil: none). Call before
// serving.
func (s *Server) SetUsers(u *users.Store) { s.users = u }

func (s *Server) describeUserScramCredentials(r *Request) {
	req := r.Msg.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.authorizedCluster(r, acls.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	var (
		names []string
		count = map[string]int{}
	)
	for _, u := range req.Users {
		if count[u.Name]++; count[u.Name] == 1 {
			names = append(names, u.Name)
		}
	}
	var found []users.UserCredentials
	if s.users != nil {
		found = s.users.Describe(names) // no names: every user
	}
	byName := map[string]users.UserCredentials{}
	for _, uc := range found {
		byName[uc.User] = uc
	}
	result := func(uc users.UserCredentials) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = uc.User
		for _, c := range uc.Infos {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = int8(c.Mechanism), c.Iterations
			res.CredentialInfos = append(res.CredentialInfos, info)
		}
		return res
	}
	if len(names) == 0 {
		for _, uc := range found {
			resp.Results = append(resp.Results, result(uc))
		}
		r.Respond(resp)
		return
	}
	for _, n := range names {
		uc, ok := byName[n]
		res := result(users.UserCredentials{User: n})
		switch {
		case count[n] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = errorMessage(fmt.Errorf("cannot describe user %q more than once in one request", n))
		case !ok:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = errorMessage(fmt.Errorf("attempt to describe a user credential that does not exist: %s", n))
		default:
			res = result(uc)
		}
		resp.Results = append(resp.Results, res)
	}
	r.Respond(resp)
}
