package protocol

// AlterUserScramCredentials: version 0. Upsertions carry the salted
// password (Hi(password, salt, iterations)); the store keeps only the salt,
// iterations, StoredKey and ServerKey derived from it. One result per user,
// as Kafka's: a user named twice for one mechanism gets DUPLICATE_RESOURCE,
// an unknown mechanism UNSUPPORTED_SASL_MECHANISM, an empty name, salt or
// salted password or iterations outside 4096-16384 UNACCEPTABLE_CREDENTIAL,
// a deletion of a credential that is not there RESOURCE_NOT_FOUND; a user
// with any of these has none of its changes applied (re-checked in apply,
// where a deletion racing another may still fail alone). The changes are
// one replicated command; a cluster follower forwards the request to the
// leader (forward.go). ACLs: ALTER on the cluster,
// else every user gets CLUSTER_AUTHORIZATION_FAILED, as Kafka.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/users"
)

func init() { register(51, 0, 0, (*Server).alterUserScramCredentials) }

func (s *Server) alterUserScramCredentials(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	req := r.Msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if !s.authorizedCluster(r, acls.Alter) {
		r.Respond(s.refuseAlterScram(req))
		return
	}
	s.async(r, func() kmsg.Response { return s.alterScram(req) })
}

// refuseAlterScram answers every user CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) refuseAlterScram(req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u, kerr.ClusterAuthorizationFailed.Code
			resp.Results = append(resp.Results, res)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp
}

func (s *Server) alterScram(req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	failed := map[string]error{}
	seen := map[string]map[int8]bool{}
	note := func(user string, mech int8) {
		if seen[user] == nil {
			seen[user] = map[int8]bool{}
			order = append(order, user)
		}
		if seen[user][mech] && failed[user] == nil {
			failed[user] = fmt.Errorf("%w: user %q named more than once for one mechanism", kerr.DuplicateResource, user)
		}
		seen[user][mech] = true
	}
	check := func(user string, mech int8) {
		switch {
		case failed[user] != nil:
		case user == "":
			failed[user] = fmt.Errorf("%w: empty user name", kerr.UnacceptableCredential)
		case !users.Mechanism(mech).Valid():
			failed[user] = fmt.Errorf("%w: unknown SCRAM mechanism %d", kerr.UnsupportedSaslMechanism, mech)
		}
	}
	for _, d := range req.Deletions {
		note(d.Name, d.Mechanism)
		check(d.Name, d.Mechanism)
	}
	for _, u := range req.Upsertions {
		note(u.Name, u.Mechanism)
		check(u.Name, u.Mechanism)
		switch {
		case failed[u.Name] != nil:
		case u.Iterations < users.MinIterations || u.Iterations > users.MaxIterations:
			failed[u.Name] = fmt.Errorf("%w: iterations %d outside %d-%d", kerr.UnacceptableCredential, u.Iterations, users.MinIterations, users.MaxIterations)
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			failed[u.Name] = fmt.Errorf("%w: empty salt or salted password", kerr.UnacceptableCredential)
		}
	}
	var (
		ups     []users.Upsert
		dels    []users.Deletion
		opUsers []string // the user of each op, upserts then deletions
	)
	for _, u := range req.Upsertions {
		if failed[u.Name] == nil {
			m := users.Mechanism(u.Mechanism)
			ups = append(ups, users.Upsert{User: u.Name, Credential: users.FromSaltedPassword(m, u.SaltedPassword, u.Salt, u.Iterations)})
			opUsers = append(opUsers, u.Name)
		}
	}
	for _, d := range req.Deletions {
		if failed[d.Name] == nil {
			dels = append(dels, users.Deletion{User: d.Name, Mechanism: users.Mechanism(d.Mechanism)})
			opUsers = append(opUsers, d.Name)
		}
	}
	if len(opUsers) > 0 {
		var (
			results []error
			err     error
		)
		if s.users == nil {
			err = fmt.Errorf("%w: SCRAM credentials are not served (no SASL listener configured)", kerr.UnsupportedSaslMechanism)
		} else {
			results, err = s.users.Alter(ups, dels)
		}
		for i, u := range opUsers {
			e := err
			if e == nil && i < len(results) {
				e = results[i]
			}
			if e != nil && failed[u] == nil {
				failed[u] = e
			}
		}
	}
	for _, u := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = u
		if err := failed[u]; err != nil {
			res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}
