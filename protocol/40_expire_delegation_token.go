package protocol

// ExpireDelegationToken: versions 0-2. The token with the given HMAC gets
// the expiry now + ExpiryPeriodMillis, never past its max; a negative
// period removes it at once (it no longer authenticates nor is
// described). Who may, and the errors, as RenewDelegationToken. A cluster
// follower forwards the request to the leader.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(40, 0, 2, (*Server).expireDelegationToken) }

func (s *Server) expireDelegationToken(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	req := r.Msg.(*kmsg.ExpireDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	if err := s.tokenRefusal(r); err != nil {
		resp.ErrorCode = tokenCode(err)
		r.Respond(resp)
		return
	}
	principal := principalOf(r)
	s.async(r, func() kmsg.Response {
		exp, err := s.users.ExpireToken(req.HMAC, principal, req.ExpiryPeriodMillis, time.Now().UnixMilli())
		if err != nil {
			resp.ErrorCode = tokenCode(err)
			return resp
		}
		resp.ExpiryTimestamp = exp
		return resp
	})
}
